from memsync.entry import main

main()
