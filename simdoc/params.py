"""The parameters of each stage, validated once, with their defaults: the one place they live.

One frozen dataclass per stage. A field is named as its flag (``--max-bytes``
is ``max_bytes``), its manifest key and its keyword, so a parameter reads
the same from the command line to the index directory. ``None`` means "not
asked": the stage takes the index's value, else the default below (an index
keeps the parameters it was built with; asking for another one is a
:class:`~simdoc.errors.ParameterMismatch` unless ``--rebuild``).

Each class checks its values when it is made, with the messages the command
line gives, so a bad value is refused before any work. A check that needs the
index (``--bands`` times ``--rows`` against the index's ``--num-perm``) is
made by the stage that reads it.

::

    ShingleParams      unit, k, lowercase, unicode, min_length; how files are read (max_bytes, follow_symlinks,
                       include, exclude, text_field, id_field, main_content, all_responses)
    SignatureParams    num_perm, seed, scheme
    BandingParams      threshold, or bands and rows chosen by hand      (simdoc index)
    PairsParams        threshold, measure, verify, all_candidates, new_only
    Params             the four together: what `simdoc pairs` asks of the stages

The threshold of every command is decided in one place, :func:`choose_threshold`:
the one asked (``--threshold``), else the one the index was banded for, else
the measure's default, which the command then names on stderr (:class:`Threshold`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from simdoc.errors import UsageError
from simdoc.lsh import check_threshold, s_curve_threshold
from simdoc.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, SCHEMES
from simdoc.shingling import DEFAULT_UNICODE, UNICODE_FORMS, UNITS, ShingleSpec
from simdoc.similarity import MEASURES

# The defaults of the stages. The signature's are MinHasher's own (simdoc.minhash
# cannot import this module), named here so that a stage never spells one out.
DEFAULT_UNIT = "char"  # k then defaults to the unit's (shingling.DEFAULT_K)
DEFAULT_LOWERCASE = True
DEFAULT_FOLLOW_SYMLINKS = False
DEFAULT_TEXT_FIELD = "text"
DEFAULT_MAIN_CONTENT = False
DEFAULT_ALL_RESPONSES = False
# What a shingle parameter that an index's manifest does not hold means: an index built before
# the parameter existed was built the way simdoc read documents then.
LEGACY_SHINGLE = {"main_content": False, "all_responses": False, "unicode": "none", "min_length": 0}
DEFAULT_MIN_LENGTH = 0  # see README "What is a document": pairs of short texts are pairs
DEFAULT_THRESHOLD = 0.6  # set Jaccard
DEFAULT_BAG_THRESHOLD = 0.4  # bag Jaccard is at most 0.5 (identical bags)
MAX_NUM_PERM = 65536
MAX_SEED = 2**64 - 1


def _globs(value: Iterable[str] | None) -> tuple[str, ...] | None:
    # A set of patterns: order and repeats do not change what is read, nor the index.
    return tuple(sorted(set(value))) if value else None


def _whole(value: object) -> bool:
    return isinstance(value, (int, np.integer))


@dataclass(frozen=True)
class ShingleParams:
    """What a shingle is (unit, k, lowercase), and which documents are read and how.

    ``include``/``exclude`` are kept sorted and without repeats, as the index
    stores them. :meth:`resolved` fills what was not asked.
    """

    unit: str | None = None
    k: int | None = None
    lowercase: bool | None = None
    unicode: str | None = None
    min_length: int | None = None
    max_bytes: int | None = None
    follow_symlinks: bool | None = None
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    text_field: str | None = None
    id_field: str | None = None
    main_content: bool | None = None
    all_responses: bool | None = None

    def __post_init__(self) -> None:
        if self.unit is not None and self.unit not in UNITS:
            raise UsageError(f"unknown shingle unit {self.unit!r}; choose one of {', '.join(UNITS)}")
        if self.k is not None:
            ShingleSpec(self.unit or DEFAULT_UNIT, self.k)  # its range check and message
        if self.unicode is not None and self.unicode not in UNICODE_FORMS:
            raise UsageError(f"--unicode must be one of {', '.join(UNICODE_FORMS)}, got {self.unicode!r}")
        if self.min_length is not None and (not _whole(self.min_length) or self.min_length < 0):
            raise UsageError(f"--min-length must be a whole number of at least 0, got {self.min_length!r}")
        if self.max_bytes is not None and self.max_bytes < 1:
            raise UsageError(f"--max-bytes must be at least 1, got {self.max_bytes}")
        object.__setattr__(self, "include", _globs(self.include))
        object.__setattr__(self, "exclude", _globs(self.exclude))

    def asked(self) -> dict[str, Any]:
        """The parameters given, as the manifest holds them (lists, not tuples)."""
        return {
            f.name: list(v) if isinstance(v, tuple) else v
            for f in fields(self)
            if (v := getattr(self, f.name)) is not None
        }

    def resolved(self, stored: Mapping[str, Any] | None = None) -> ShingleParams:
        """Every parameter set: as asked, else as ``stored`` (the index's), else the default.

        ``k`` is the index's only for the index's unit: ``--unit word`` on a
        char index means word shingles of the word default.
        """
        base = stored or {}
        if stored is not None:
            base = {**LEGACY_SHINGLE, **base}
        unit = self.unit if self.unit is not None else base.get("unit", DEFAULT_UNIT)
        k = self.k if self.k is not None else (base.get("k") if base.get("unit") == unit else None)
        lowercase = self.lowercase if self.lowercase is not None else base.get("lowercase", DEFAULT_LOWERCASE)
        unicode = self.unicode if self.unicode is not None else base.get("unicode", DEFAULT_UNICODE)
        spec = ShingleSpec(unit, k, lowercase, unicode)
        follow = self.follow_symlinks if self.follow_symlinks is not None else base.get("follow_symlinks")
        return ShingleParams(
            unit=spec.unit,
            k=spec.k,
            lowercase=spec.lowercase,
            unicode=spec.unicode,
            min_length=self.min_length if self.min_length is not None else base.get("min_length", DEFAULT_MIN_LENGTH),
            max_bytes=self.max_bytes if self.max_bytes is not None else base.get("max_bytes"),
            follow_symlinks=DEFAULT_FOLLOW_SYMLINKS if follow is None else follow,
            include=self.include if self.include is not None else base.get("include"),
            exclude=self.exclude if self.exclude is not None else base.get("exclude"),
            text_field=self.text_field if self.text_field is not None else base.get("text_field", DEFAULT_TEXT_FIELD),
            id_field=self.id_field if self.id_field is not None else base.get("id_field"),
            main_content=self.main_content if self.main_content is not None else base.get("main_content", DEFAULT_MAIN_CONTENT),
            all_responses=self.all_responses if self.all_responses is not None else base.get("all_responses", DEFAULT_ALL_RESPONSES),
        )

    @property
    def spec(self) -> ShingleSpec:
        """The shingle definition (unit and lowercase default when not set)."""
        return ShingleSpec(
            self.unit or DEFAULT_UNIT, self.k, DEFAULT_LOWERCASE if self.lowercase is None else self.lowercase,
            self.unicode or DEFAULT_UNICODE,
        )

    def manifest(self) -> dict[str, Any]:
        """The shingle stage's parameters as the manifest keeps them (of resolved parameters)."""
        return {
            **self.spec.as_params(),
            "min_length": int(self.min_length or 0),
            "max_bytes": self.max_bytes,
            "follow_symlinks": bool(self.follow_symlinks),
            "include": list(self.include or ()),
            "exclude": list(self.exclude or ()),
            "text_field": self.text_field or DEFAULT_TEXT_FIELD,
            "id_field": self.id_field,
            "main_content": bool(self.main_content),
            "all_responses": bool(self.all_responses),
        }


def with_legacy(stored: Mapping[str, Any]) -> dict[str, Any]:
    """An index's shingle parameters with the keys an older simdoc did not write, as they were then."""
    return {**LEGACY_SHINGLE, **stored}


@dataclass(frozen=True)
class SignatureParams:
    """The MinHash signature: its length, the seed of the hash family, the scheme."""

    num_perm: int | None = None
    seed: int | None = None
    scheme: str | None = None

    def __post_init__(self) -> None:
        if self.num_perm is not None and (not _whole(self.num_perm) or not 1 <= self.num_perm <= MAX_NUM_PERM):
            raise UsageError(f"num_perm must be a whole number from 1 to {MAX_NUM_PERM}, got {self.num_perm!r}")
        if self.seed is not None and (not _whole(self.seed) or not 0 <= self.seed <= MAX_SEED):
            raise UsageError(f"seed must be a whole number from 0 to 2**64-1, got {self.seed!r}")
        if self.scheme is not None and self.scheme not in SCHEMES:
            raise UsageError(f"scheme must be one of {', '.join(SCHEMES)}, got {self.scheme!r}")
        for name in ("num_perm", "seed"):  # numpy integers would not go into the manifest's JSON
            if getattr(self, name) is not None:
                object.__setattr__(self, name, int(getattr(self, name)))

    def asked(self) -> dict[str, Any]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    def resolved(self, stored: Mapping[str, Any] | None = None) -> SignatureParams:
        """Every parameter set: as asked, else as ``stored`` (the index's), else the default."""
        base = stored or {}
        return SignatureParams(
            num_perm=self.num_perm if self.num_perm is not None else base.get("num_perm", DEFAULT_NUM_PERM),
            seed=self.seed if self.seed is not None else base.get("seed", DEFAULT_SEED),
            scheme=self.scheme if self.scheme is not None else base.get("scheme", DEFAULT_SCHEME),
        )

    def manifest(self) -> dict[str, Any]:
        """As the manifest keeps them (of resolved parameters)."""
        return {"num_perm": self.num_perm, "seed": self.seed, "scheme": self.scheme}


@dataclass(frozen=True)
class BandingParams:
    """The LSH banding: chosen for ``threshold`` (a set Jaccard), or ``bands`` × ``rows`` by hand.

    ``bands`` and ``rows`` go together; their product is checked against the
    signature length by the index stage, which knows it.
    """

    threshold: float | None = None
    bands: int | None = None
    rows: int | None = None

    def __post_init__(self) -> None:
        if (self.bands is None) != (self.rows is None):
            raise UsageError("--bands and --rows go together: give both, or neither and let --threshold choose")
        if self.bands is not None and (self.bands < 1 or self.rows < 1):
            raise UsageError(f"--bands and --rows must be at least 1, got --bands {self.bands} --rows {self.rows}")
        if self.threshold is not None:
            object.__setattr__(self, "threshold", check_threshold(self.threshold))


@dataclass(frozen=True)
class Threshold:
    """The threshold a command works at, and where it comes from.

    ``source``: ``asked`` (--threshold), ``index`` (the one the index was
    banded for) or ``default`` (the index holds none of this measure).
    """

    value: float
    measure: str
    source: str

    def describe(self) -> str:
        """The cut as a summary line states it, naming the default when it decided."""
        cut = f"{self.measure} jaccard >= {self.value:g}"
        return cut + (", the default" if self.source == "default" else "")


def index_threshold(stored: Mapping[str, Any] | None, measure: str = "set") -> float | None:
    """The ``measure`` threshold an index was banded for (``stored``: its index stage's
    parameters), or None if it holds none.

    A banding for the other measure holds none of this one. A banding chosen by
    hand without a threshold holds none either: in its place the index
    records the S-curve midpoint (1/b)^(1/r), which nobody asked to cut at.
    """
    if not stored or stored.get("measure", "set") != measure:
        return None
    if measure == "bag":
        return stored.get("bag_threshold")
    if stored.get("explicit") and stored["threshold"] == round(s_curve_threshold(stored["bands"], stored["rows"]), 6):
        return None
    return stored["threshold"]


def choose_threshold(asked: float | None, measure: str, stored: Mapping[str, Any] | None) -> Threshold:
    """The threshold of every command that takes ``--threshold``: the one ``asked``, else the
    index's (``stored``: its index stage's parameters, None if it has none), else the
    measure's default. A stored threshold is thus never replaced unless one is asked for."""
    if asked is not None:
        return Threshold(float(asked), measure, "asked")
    held = index_threshold(stored, measure)
    if held is not None:
        return Threshold(float(held), measure, "index")
    return Threshold(DEFAULT_THRESHOLD if measure == "set" else DEFAULT_BAG_THRESHOLD, measure, "default")


@dataclass(frozen=True)
class PairsParams:
    """Which pairs are printed: at ``threshold`` of ``measure``, verified or estimated, or every candidate.

    ``threshold`` None is not asked: :meth:`resolved` takes the index's, else
    the measure's default (see :func:`choose_threshold`), and keeps in
    ``chosen`` where it came from. ``new_only`` keeps the pairs with a
    document added or changed since the last ``--new`` report.
    """

    threshold: float | None = None
    measure: str = "set"
    verify: bool = True
    all_candidates: bool = False
    new_only: bool = False
    chosen: Threshold | None = field(default=None, init=False)  # set by resolved()

    def __post_init__(self) -> None:
        if self.measure not in MEASURES:
            raise UsageError(f"--measure must be one of {', '.join(MEASURES)}, got {self.measure!r}")
        if self.threshold is None:
            return
        object.__setattr__(self, "threshold", check_threshold(self.threshold))
        if self.measure == "bag" and self.threshold > 0.5:
            raise UsageError(
                f"bag Jaccard is at most 0.5 (identical bags), so --threshold {self.threshold} can never be met",
                hint="use a threshold in (0, 0.5] with --measure bag",
            )

    def resolved(self, stored: Mapping[str, Any] | None) -> PairsParams:
        """With the threshold set: as asked, else the index's (``stored``: its index stage's
        parameters, None without one), else the measure's default."""
        chosen = choose_threshold(self.threshold, self.measure, stored)
        made = replace(self, threshold=chosen.value)
        object.__setattr__(made, "chosen", chosen)
        return made

    @property
    def cut(self) -> float:
        """The threshold the pairs are kept at: the one set (see :meth:`resolved`), else the measure's default."""
        if self.threshold is not None:
            return self.threshold
        return DEFAULT_THRESHOLD if self.measure == "set" else DEFAULT_BAG_THRESHOLD

    @property
    def banding_threshold(self) -> float:
        """The set Jaccard to band for: a bag Jaccard of t is a set Jaccard of t/(1-t) when no shingle repeats."""
        t = self.cut
        return min(t / (1.0 - t), 1.0) if self.measure == "bag" else t


@dataclass(frozen=True)
class Params:
    """What `simdoc pairs` asks of every stage. ``banding`` holds only a hand-chosen
    ``bands``/``rows``: the pairs' ``threshold`` decides the rest (see :class:`PairsParams`)."""

    shingle: ShingleParams = field(default_factory=ShingleParams)
    signature: SignatureParams = field(default_factory=SignatureParams)
    banding: BandingParams = field(default_factory=BandingParams)
    pairs: PairsParams = field(default_factory=PairsParams)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Params:
        """From keywords named as the flags of `simdoc pairs` (``--threshold`` is the pairs').

        Every key must be a parameter of a stage: a misspelt one is a TypeError, not ignored.
        """
        left = dict(options)

        def take(kind: type, names: Iterable[str]) -> Any:
            return kind(**{n: left.pop(n) for n in names if n in left})

        made = cls(
            shingle=take(ShingleParams, _names(ShingleParams)),
            signature=take(SignatureParams, _names(SignatureParams)),
            pairs=take(PairsParams, _names(PairsParams)),
            banding=take(BandingParams, ("bands", "rows")),
        )
        if left:
            raise TypeError(f"not a parameter of any stage: {', '.join(sorted(left))}")
        return made


def _names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind) if f.init)
