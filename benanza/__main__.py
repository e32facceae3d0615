from benanza.cli import main

main()
