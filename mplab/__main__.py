from mplab.cli import main

main()
