from memsync.cli import run_main

run_main()
