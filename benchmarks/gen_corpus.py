#!/usr/bin/env python3
"""Deterministic synthetic corpus for the simdoc benchmarks.

    python benchmarks/gen_corpus.py OUTDIR --docs N --seed S [--dup-fraction 0.3]

Writes OUTDIR/dNNN/docNNNNNNN.txt (at most 1000 files per folder) and
OUTDIR/.MANIFEST.json (parameters, sizes, and every planted
(source, derived) pair with how it was derived). The manifest's name starts
with a dot because simdoc, like the other benchmark scripts, takes every
non-hidden file under the corpus as a document.

Nothing is downloaded. Text is made from an embedded word model:

* a fixed vocabulary: a typed list of common English words, ranked first,
  followed by pseudo-words built from English-like syllables (always the same
  list, whatever the seed);
* word frequencies follow a Zipf-Mandelbrot law over that ranking, and each
  document also has its own handful of "topic" words that it repeats, which
  keeps unrelated documents apart (char 5-shingle Jaccard of random pairs:
  median about 0.07, 99.9th percentile below 0.09);
* sentences of 4-40 words with commas and . ? ! endings, paragraphs of 2-7
  sentences, a title line and, for some documents, a footer line;
  documents are 2-5 KB.

About ``dup_fraction`` of the documents are derived from an original
document. Each derived document gets a target Jaccard: exact byte copies,
whitespace/case-only reformatting (Jaccard 1.0 after normalisation), and
edited copies whose targets are spread over 0.5-1.0 with extra weight near
0.8. Edits (word/phrase substitutions, sentence deletions and insertions,
paragraph swaps, title and footer changes) are applied until an estimate of
the character-shingle Jaccard reaches the target; the exact value lands
near it. Use benchmarks/truth.py to measure the real values.

The same arguments give a byte-identical corpus.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

GENERATOR_VERSION = 1
SHARD_SIZE = 1000
MANIFEST_NAME = ".MANIFEST.json"
VOCAB_SEED = 0x5D0C  # fixed: the vocabulary does not depend on --seed

# Common English words, roughly by frequency. These take the top ranks.
COMMON_WORDS = """
the of and to a in is that it was for on are as with his they at be this from
have or by one had not but what all were when we there can an your which their
said if do will each about how up out them then she many some so these would
other into has more her two like him see time could no make than first been its
who now people my made over did down only way find use may water long little
very after words called just where most know get through back much before go
good new write our used me man too any day same right look think also around
another came come work three word must because does part even place well such
here take why things help put years different away again off went old number
great tell men say small every found still between name should home big give
air line set own under read last never us left end along while might next sound
below saw something thought both few those always looked show large often
together asked house world going want school important until form food keep
children feet land side without boy once animals life enough took sometimes
four head above kind began almost live page got earth need far hand high year
mother light parts country father let night following picture being study
second eyes soon times story boys since white days ever paper hard near
sentence better best across during today others however sure means knew try
told young miles sun ways thing whole hear example heard several change answer
room sea against top turned learn point city play toward five using himself
usually money river morning open market table voice half power order town
field road state system field report result reason because plan short early
case fact group problem service question hour body business idea moment
""".split()

ONSETS = ("b c d f g h j k l m n p r s t v w y z bl br ch cl cr dr fl fr gl gr "
          "pl pr sc sh sk sl sm sn sp st str sw th tr tw wh qu").split()
NUCLEI = "a e i o u ai ea ee ie oa oo ou ay".split()
NUCLEUS_WEIGHTS = (6, 8, 5, 5, 3, 1, 1, 1, 1, 1, 1, 1, 1)
CODAS = "n r s t l m d ck nd ng nt rd rk rn rt sh st th ll ss x".split()
SUFFIXES = "s ed ing er ly tion ment ness able al ic ous ity ive es ers y en le".split()

TITLE_FORMS = ("{t}", "Notes on {t}", "Chapter {n}: {t}", "On the {t}",
               "{t}: A Report", "A Short History of {t}", "Why {t} Matters")
FOOTER_FORMS = (
    "Posted by {p} {q} on {d}.",
    "Filed under {w1}, {w2} and {w3}.",
    "Copyright {y} {p} {q}. All rights reserved.",
    "Last updated {d}. Reading time: {n} minutes.",
    "This article first appeared in the {w1} {w2} Review, issue {n}.",
)

TOPIC_WORDS = 25      # per-document topic vocabulary
TOPIC_RATE = 0.10     # share of tokens drawn from the topic words
COMMA_RATE = 0.06
ZIPF_S = 1.05
ZIPF_Q = 2.7
N_PSEUDO = 8000
SIZE_SKEW = 1.3


# --------------------------------------------------------------------------
# vocabulary


def build_vocabulary() -> list[str]:
    """Common words followed by pseudo-words; fixed across seeds."""
    rng = np.random.default_rng(VOCAB_SEED)
    common: list[str] = []
    seen: set[str] = set()
    for w in COMMON_WORDS:
        if w not in seen:
            seen.add(w)
            common.append(w)
    onset_p = np.array([3.0 if len(o) == 1 else 1.0 for o in ONSETS])
    onset_p /= onset_p.sum()
    nucleus_p = np.array(NUCLEUS_WEIGHTS, dtype=float)
    nucleus_p /= nucleus_p.sum()
    pseudo: list[str] = []
    while len(pseudo) < N_PSEUDO:
        n_syl = int(rng.choice([1, 2, 3, 4], p=[0.25, 0.45, 0.24, 0.06]))
        parts = []
        for s in range(n_syl):
            if s > 0 or rng.random() < 0.8:
                parts.append(ONSETS[rng.choice(len(ONSETS), p=onset_p)])
            parts.append(NUCLEI[rng.choice(len(NUCLEI), p=nucleus_p)])
            if rng.random() < (0.55 if s == n_syl - 1 else 0.3):
                parts.append(CODAS[rng.integers(len(CODAS))])
        if rng.random() < 0.3:
            parts.append(SUFFIXES[rng.integers(len(SUFFIXES))])
        w = "".join(parts)
        if 2 <= len(w) <= 14 and w not in seen:
            seen.add(w)
            pseudo.append(w)
    # shorter words tend to be more frequent: rank by length plus noise
    keys = np.array([len(w) for w in pseudo], dtype=float) + rng.normal(0.0, 2.0, len(pseudo))
    pseudo = [pseudo[i] for i in np.argsort(keys, kind="stable")]
    return common + pseudo


# --------------------------------------------------------------------------
# text model


class TextModel:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.vocab = build_vocabulary()
        self.n_common = len(dict.fromkeys(COMMON_WORDS))
        v = len(self.vocab)
        ranks = np.arange(1, v + 1, dtype=float)
        p = 1.0 / (ranks + ZIPF_Q) ** ZIPF_S
        cdf = np.cumsum(p / p.sum())
        cdf[-1] = 1.0
        self.cdf = cdf
        self.tok_len = np.array([len(w) + 1 for w in self.vocab], dtype=np.int64)
        self.mean_tok = float((p / p.sum()) @ self.tok_len)
        self._spare: list[str] = []

    # -- words -------------------------------------------------------------
    def topic(self) -> np.ndarray:
        return self.rng.integers(self.n_common, len(self.vocab), TOPIC_WORDS)

    def words(self, m: int, topic: np.ndarray | None) -> np.ndarray:
        rng = self.rng
        ids = np.searchsorted(self.cdf, rng.random(m), side="right")
        if topic is not None:
            mask = rng.random(m) < TOPIC_RATE
            k = int(mask.sum())
            if k:
                ids[mask] = topic[rng.integers(0, len(topic), k)]
        return ids

    def sentence_lengths(self, n: int) -> np.ndarray:
        # mean about 17 words, long right tail, 4..40
        return np.clip(np.rint(self.rng.gamma(4.0, 4.2, n)), 4, 40).astype(np.int64)

    def render_sentences(self, ids: np.ndarray, lens: np.ndarray) -> list[str]:
        rng = self.rng
        vocab = self.vocab
        toks = [vocab[i] for i in ids.tolist()]
        for j in np.flatnonzero(rng.random(len(toks)) < COMMA_RATE).tolist():
            toks[j] += ","
        ends = np.cumsum(lens).tolist()
        marks = rng.random(len(ends)).tolist()
        out = []
        start = 0
        for end, m in zip(ends, marks):
            s = " ".join(toks[start:end]).rstrip(",")
            punct = "." if m < 0.9 else ("?" if m < 0.96 else "!")
            out.append(s[0].upper() + s[1:] + punct)
            start = end
        return out

    def sentences(self, n: int, topic: np.ndarray | None) -> list[str]:
        lens = self.sentence_lengths(n)
        return self.render_sentences(self.words(int(lens.sum()), topic), lens)

    def spare_sentence(self) -> str:
        """One new sentence (drawn 64 at a time)."""
        if not self._spare:
            self._spare = self.sentences(64, None)
        return self._spare.pop()

    def body(self, target_chars: int, topic: np.ndarray) -> list[list[str]]:
        """Paragraphs of sentences, at least target_chars long, cut at a sentence end."""
        rng = self.rng
        est = int(target_chars / (self.mean_tok * 17.0) * 1.25) + 3
        lens = self.sentence_lengths(est)
        ids = self.words(int(lens.sum()), topic)
        sent_chars = np.cumsum(np.add.reduceat(self.tok_len[ids], np.cumsum(lens) - lens))
        while sent_chars[-1] < target_chars:  # rare: sample more sentences
            more = self.sentence_lengths(8)
            more_ids = self.words(int(more.sum()), topic)
            more_chars = np.add.reduceat(self.tok_len[more_ids], np.cumsum(more) - more)
            sent_chars = np.concatenate([sent_chars, sent_chars[-1] + np.cumsum(more_chars)])
            lens = np.concatenate([lens, more])
            ids = np.concatenate([ids, more_ids])
        k = int(np.searchsorted(sent_chars, target_chars)) + 1
        lens = lens[:k]
        sents = self.render_sentences(ids[: int(lens.sum())], lens)
        paras = []
        i = 0
        sizes = rng.integers(2, 8, len(sents)).tolist()
        for size in sizes:
            if i >= len(sents):
                break
            paras.append(sents[i:i + size])
            i += size
        return paras

    # -- header / footer -----------------------------------------------------
    def title(self) -> str:
        rng = self.rng
        n = int(rng.integers(2, 6))
        ids = rng.integers(0, min(len(self.vocab), 3000), n)
        t = " ".join(self.vocab[i].capitalize() for i in ids.tolist())
        form = TITLE_FORMS[int(rng.integers(len(TITLE_FORMS)))]
        return form.format(t=t, n=int(rng.integers(1, 40)))

    def footer(self) -> str:
        rng = self.rng
        w = [self.vocab[i] for i in rng.integers(self.n_common, len(self.vocab), 5).tolist()]
        form = FOOTER_FORMS[int(rng.integers(len(FOOTER_FORMS)))]
        y = int(rng.integers(1995, 2025))
        d = f"{y}-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"
        return form.format(p=w[0].capitalize(), q=w[1].capitalize(), d=d, y=y,
                           n=int(rng.integers(2, 60)), w1=w[2], w2=w[3], w3=w[4])


# --------------------------------------------------------------------------
# documents: (title, paragraphs [[sentence, ...], ...], footer or "")


def render(doc) -> str:
    title, paras, footer = doc
    parts = [title]
    parts.extend(" ".join(p) for p in paras)
    if footer:
        parts.append(footer)
    return "\n\n".join(parts) + "\n"


def fit(doc, max_bytes: int) -> int:
    """Drop last sentences of the longest paragraphs until doc fits max_bytes."""
    paras = doc[1]
    n = 0
    while len(render(doc).encode("utf-8")) > max_bytes and sum(len(p) for p in paras) > 1:
        longest = max(range(len(paras)), key=lambda q: len(paras[q]))
        paras[longest].pop()
        if not paras[longest]:
            paras.pop(longest)
        n += 1
    return n


def make_original(model: TextModel, min_bytes: int, max_bytes: int):
    rng = model.rng
    title = model.title()
    footer = model.footer() if rng.random() < 0.55 else ""
    # Beta(SIZE_SKEW, 1) between the bounds: mean file about 3.7 KB at 2-5 KB,
    # so that 100,000 documents make about 372 MB
    lo, hi = min_bytes + 150, max_bytes - 250
    target = int(lo + (hi - lo) * rng.random() ** (1.0 / SIZE_SKEW))
    overhead = len(title) + (len(footer) + 2 if footer else 0) + 3
    topic = model.topic()
    paras = model.body(max(target - overhead, 200), topic)
    doc = (title, paras, footer)
    fit(doc, max_bytes)
    return doc


def reformat(doc, rng: np.random.Generator, max_bytes: int) -> str:
    """Same normalised text, different bytes: rewrap lines, change case/spacing."""
    title, paras, footer = doc
    width = int(rng.integers(55, 90))
    parts = [title.upper() if rng.random() < 0.5 else title]
    for p in paras:
        parts.append(textwrap.fill(" ".join(p), width=width))
    if footer:
        parts.append("  " + footer)
    sep = "\n\n" if rng.random() < 0.5 else "\n \n\t"
    text = sep.join(parts) + "\n\n"
    if len(text.encode("utf-8")) > max_bytes:  # extra whitespace would overflow
        text = "\n\n".join(p.strip() for p in parts) + "\n"
    return text


# edit profiles: weights of (substitute, delete sentence, insert sentence)
PROFILES = {
    "copyedit": (0.85, 0.10, 0.05),
    "trim": (0.25, 0.65, 0.10),
    "expand": (0.25, 0.10, 0.65),
    "mixed": (0.40, 0.30, 0.30),
}
PROFILE_NAMES = tuple(PROFILES)
K = 5  # shingle size assumed by the Jaccard estimate
EST_SCALE = 0.88  # measured: exact 1 - J is about 0.88 x the estimated one


def edit(model: TextModel, src, target: float, min_bytes: int, max_bytes: int):
    """Copy src and edit it until the estimated shingle Jaccard <= target."""
    rng = model.rng
    vocab = model.vocab
    title, paras, footer = src
    paras = [list(p) for p in paras]
    n_a = len(render(src))
    cur = n_a
    removed = 0  # estimated shingles of src destroyed
    added = 0    # estimated new shingles
    counts = {"sub": 0, "del": 0, "ins": 0, "swap": 0, "title": 0, "footer": 0}

    def est() -> float:
        # the char-count estimate runs below the exact shingle Jaccard, more so
        # the more is edited (edits that overlap, shingles that recur);
        # EST_SCALE shrinks the estimated distance 1 - J to recentre it
        return 1.0 - (1.0 - (n_a - removed) / (n_a + added)) * EST_SCALE

    # cosmetic edits first, each only while still above target
    if rng.random() < 0.3 and len(paras) >= 2 and est() > target:
        i, j = rng.choice(len(paras), 2, replace=False).tolist()
        paras[i], paras[j] = paras[j], paras[i]
        removed += 4 * (K - 1) * 2
        added += 4 * (K - 1) * 2
        counts["swap"] += 1
    if rng.random() < 0.3 and est() > target:
        new = model.title()
        removed += len(title) + K - 1
        added += len(new) + K - 1
        cur += len(new) - len(title)
        title = new
        counts["title"] += 1
    if rng.random() < 0.3 and est() > target:
        new = model.footer() if (not footer or rng.random() < 0.6) else ""
        removed += len(footer) + K - 1 if footer else 0
        added += len(new) + K - 1 if new else 0
        cur += len(new) - len(footer)
        footer = new
        counts["footer"] += 1

    w_sub, w_del, w_ins = PROFILES[PROFILE_NAMES[int(rng.integers(len(PROFILES)))]]
    # uniform draws and replacement words are taken from pre-drawn buffers:
    # one numpy call per few hundred edit steps instead of several per step
    uni: list[float] = []
    bank: list[int] = []
    steps = 0
    while est() > target and steps < 5000:
        steps += 1
        if len(uni) < 8:
            uni = rng.random(512).tolist()
        if len(bank) < 3:
            bank = model.words(256, None).tolist()
        ws = w_sub
        wd = 0.0 if (cur < min_bytes + 300 or sum(len(p) for p in paras) <= 3) else w_del
        wi = 0.0 if cur > max_bytes - 300 else w_ins
        x = uni.pop() * (ws + wd + wi)
        op = 0 if x < ws else (1 if x < ws + wd else 2)
        pi = int(uni.pop() * len(paras))
        para = paras[pi]
        if op == 0:  # substitute a run of 1-3 words inside one sentence
            si = int(uni.pop() * len(para))
            toks = para[si].split(" ")
            span = min(1 + int(uni.pop() * 3), len(toks))
            j = int(uni.pop() * (len(toks) - span + 1))
            old = toks[j:j + span]
            tail = old[-1][len(old[-1].rstrip(",.?!")):]
            new = [vocab[bank.pop()] for _ in range(span)]
            if j == 0:
                new[0] = new[0].capitalize()
            new[-1] += tail
            toks[j:j + span] = new
            para[si] = " ".join(toks)
            old_len = sum(len(t) for t in old) + span - 1
            new_len = sum(len(t) for t in new) + span - 1
            removed += old_len + K - 1
            added += new_len + K - 1
            cur += new_len - old_len
            counts["sub"] += 1
        elif op == 1:  # delete a sentence
            if len(para) == 1:
                if len(paras) == 1:
                    continue
                s = paras.pop(pi)[0]
            else:
                s = para.pop(int(uni.pop() * len(para)))
            removed += len(s) + 1 + K - 1
            added += K - 1
            cur -= len(s) + 1
            counts["del"] += 1
        else:  # insert a new sentence
            s = model.spare_sentence()
            para.insert(int(uni.pop() * (len(para) + 1)), s)
            removed += K - 1
            added += len(s) + 1 + K - 1
            cur += len(s) + 1
            counts["ins"] += 1
    doc = (title, paras, footer)
    trimmed = fit(doc, max_bytes)
    if trimmed:
        counts["trim"] = trimmed
    return doc, {k: v for k, v in counts.items() if v}


def draw_target(rng: np.random.Generator) -> tuple[str, float]:
    u = rng.random()
    if u < 0.05:
        return "copy", 1.0
    if u < 0.10:
        return "reformat", 1.0
    if u < 0.55:
        return "edited", float(rng.uniform(0.5, 1.0))
    return "edited", float(np.clip(rng.normal(0.8, 0.06), 0.5, 0.995))


# --------------------------------------------------------------------------
# output


def doc_relpath(i: int, width: int) -> str:
    return f"d{i // SHARD_SIZE:0{width}d}/doc{i:07d}.txt"


def prepare_outdir(out: Path, force: bool) -> None:
    """Create out; with force, remove a corpus this script wrote there before."""
    if out.exists():
        entries = sorted(out.iterdir())
        if entries and not force:
            sys.exit(f"gen_corpus: {out} is not empty (use --force to replace a previous corpus)")
        ours = [e for e in entries
                if (e.is_dir() and e.name.startswith("d") and e.name[1:].isdigit())
                or e.name == MANIFEST_NAME]
        foreign = [e.name for e in entries if e not in ours]
        if foreign:
            sys.exit(f"gen_corpus: {out} holds {', '.join(foreign[:5])}, which this script did "
                     "not write; not touching it")
        for e in ours:
            if e.is_dir():
                shutil.rmtree(e)
            else:
                e.unlink()
    out.mkdir(parents=True, exist_ok=True)


def generate(out: Path, n_docs: int, seed: int, dup_fraction: float,
             min_bytes: int = 2000, max_bytes: int = 5000, force: bool = False) -> dict:
    if n_docs < 1:
        raise ValueError("--docs must be >= 1")
    if not 0.0 <= dup_fraction < 1.0:
        raise ValueError("--dup-fraction must be in [0, 1)")
    t0 = time.perf_counter()
    prepare_outdir(out, force)
    rng = np.random.default_rng(seed)
    model = TextModel(rng)

    n_dup = int(round(n_docs * dup_fraction))
    if n_docs - n_dup < 1:
        n_dup = n_docs - 1
    is_derived = np.zeros(n_docs, dtype=bool)
    if n_dup:
        is_derived[rng.choice(n_docs, n_dup, replace=False)] = True
    originals = np.flatnonzero(~is_derived)
    derived = np.flatnonzero(is_derived)
    sources = originals[rng.integers(0, len(originals), len(derived))] if n_dup else originals[:0]
    need = set(sources.tolist())

    width = max(3, len(str((n_docs - 1) // SHARD_SIZE)))
    for s in range((n_docs - 1) // SHARD_SIZE + 1):
        (out / f"d{s:0{width}d}").mkdir()

    total_bytes = 0
    kept = {}
    for i in originals.tolist():
        doc = make_original(model, min_bytes, max_bytes)
        if i in need:
            kept[i] = doc
        data = render(doc).encode("utf-8")
        total_bytes += len(data)
        with open(out / doc_relpath(i, width), "wb") as fh:
            fh.write(data)
    t_orig = time.perf_counter() - t0

    pairs = []
    kinds = {"copy": 0, "reformat": 0, "edited": 0}
    for i, s in zip(derived.tolist(), sources.tolist()):
        src = kept[s]
        kind, target = draw_target(rng)
        rec = {"source": doc_relpath(s, width), "derived": doc_relpath(i, width), "kind": kind}
        if kind == "copy":
            text = render(src)
        elif kind == "reformat":
            text = reformat(src, rng, max_bytes)
        else:
            doc, counts = edit(model, src, target, min_bytes, max_bytes)
            text = render(doc)
            rec["target"] = round(target, 4)
            rec["edits"] = counts
        kinds[kind] += 1
        data = text.encode("utf-8")
        total_bytes += len(data)
        with open(out / doc_relpath(i, width), "wb") as fh:
            fh.write(data)
        pairs.append(rec)

    manifest = {
        "generator": "benchmarks/gen_corpus.py",
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "docs": n_docs,
        "dup_fraction": dup_fraction,
        "min_bytes": min_bytes,
        "size_skew": SIZE_SKEW,
        "max_bytes": max_bytes,
        "shard_size": SHARD_SIZE,
        "layout": f"d{{shard:0{width}d}}/doc{{index:07d}}.txt",
        "vocabulary_size": len(model.vocab),
        "zipf": {"s": ZIPF_S, "q": ZIPF_Q},
        "topic_words": TOPIC_WORDS,
        "topic_rate": TOPIC_RATE,
        "total_bytes": total_bytes,
        "originals": int(len(originals)),
        "derived": int(len(derived)),
        "derived_kinds": kinds,
        "pairs_note": "each derived document was made from source; sources are originals; "
                      "siblings derived from the same source are near-duplicates too but are not listed",
        "pairs": pairs,
    }
    with open(out / MANIFEST_NAME, "w", encoding="utf-8", newline="\n") as fh:
        body = json.dumps({k: v for k, v in manifest.items() if k != "pairs"}, indent=1)
        fh.write(body[:-2])  # reopen the object to append the pairs one per line
        fh.write(',\n "pairs": [\n')
        fh.write(",\n".join("  " + json.dumps(p, separators=(", ", ": ")) for p in pairs))
        fh.write("\n ]\n}\n")
    elapsed = time.perf_counter() - t0
    print(f"gen_corpus: {n_docs} docs ({len(derived)} derived from {len(need)} sources), "
          f"{total_bytes / 1e6:.1f} MB in {elapsed:.1f} s "
          f"(originals {t_orig:.1f} s, derived {elapsed - t_orig:.1f} s)", file=sys.stderr)
    return manifest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--docs", type=int, required=True, help="number of documents")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--dup-fraction", type=float, default=0.3,
                    help="share of documents derived from another one (default 0.3)")
    ap.add_argument("--min-bytes", type=int, default=2000)
    ap.add_argument("--max-bytes", type=int, default=5000)
    ap.add_argument("--force", action="store_true",
                    help="replace a corpus previously generated in OUTDIR")
    args = ap.parse_args(argv)
    if args.max_bytes - args.min_bytes < 1000:
        ap.error("--max-bytes must exceed --min-bytes by at least 1000")
    generate(args.outdir, args.docs, args.seed, args.dup_fraction,
             args.min_bytes, args.max_bytes, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
