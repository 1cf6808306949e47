from simdoc.cli import main

main()
