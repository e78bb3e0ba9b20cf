# Two V100s on one NVLink board and two K80s behind one PCIe switch, on two
# NUMA nodes. Used by unit tests, the e2e test and `make gpu-check`.
fingerprint_period = "1s"

mps_profile {
  name   = "mps-50"
  shares = 2
  models = ["Tesla V100-SXM2-16GB"]
}

fake {
  driver_version = "535.104.05"
  cuda_version   = "12.2"

  gpu {
    uuid               = "GPU-v100-0"
    model              = "Tesla V100-SXM2-16GB"
    memory_mib         = 16384
    compute_capability = "7.0"
    pci_bus_id         = "00000000:06:00.0"
    numa_node          = 0
    board              = "nvlink0"
    host_bridge        = "hb0"
    power_limit_w      = 300
    # what the official plugin publishes too (bar1, pci_bandwidth, ...)
    max_sm_clock_mhz     = 1530
    max_memory_clock_mhz = 877
    bar1_mib             = 16384
    pcie_generation      = 3
    pcie_width           = 16
    persistence_mode     = true
  }
  gpu {
    uuid               = "GPU-v100-1"
    model              = "Tesla V100-SXM2-16GB"
    memory_mib         = 16384
    compute_capability = "7.0"
    pci_bus_id         = "00000000:07:00.0"
    numa_node          = 0
    board              = "nvlink0"
    host_bridge        = "hb0"
    power_limit_w      = 300
    # what the official plugin publishes too (bar1, pci_bandwidth, ...)
    max_sm_clock_mhz     = 1530
    max_memory_clock_mhz = 877
    bar1_mib             = 16384
    pcie_generation      = 3
    pcie_width           = 16
    persistence_mode     = true
  }
  gpu {
    uuid               = "GPU-k80-0"
    model              = "Tesla K80"
    memory_mib         = 11441
    compute_capability = "3.7"
    pci_bus_id         = "00000000:85:00.0"
    numa_node          = 1
    pcie_switch        = "sw1"
  }
  gpu {
    uuid               = "GPU-k80-1"
    model              = "Tesla K80"
    memory_mib         = 11441
    compute_capability = "3.7"
    pci_bus_id         = "00000000:86:00.0"
    numa_node          = 1
    pcie_switch        = "sw1"
  }
}
