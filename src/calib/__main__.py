from .cli.launch import console_main

console_main()
