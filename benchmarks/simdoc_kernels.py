"""``simdoc`` with the compiled kernels for every stage, however small (kernel_choice.SMALL_BYTES = 0).

For an A/B against the default, which runs a stage that reads under
:data:`simdoc.kernel_choice.SMALL_BYTES` on the numpy reference:

    python benchmarks/bench_update.py CORPUS WORKDIR --fraction 0.001 \\
        --simdoc-cmd "python benchmarks/simdoc_kernels.py"
"""

import simdoc.kernel_choice

simdoc.kernel_choice.SMALL_BYTES = 0

if __name__ == "__main__":
    from simdoc.__main__ import main

    main()
