vc   = "research"
gpus = 2
