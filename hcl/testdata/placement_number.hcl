placement = 3
