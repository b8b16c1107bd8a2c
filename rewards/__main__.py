from rewards.cli import main

main()
