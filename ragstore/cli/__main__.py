from ragstore.cli.main import main

main()
