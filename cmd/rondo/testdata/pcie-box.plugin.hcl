# 2-socket PCIe box: 8 V100s, two per PCIe switch, two switches per NUMA node
fake {
  gpu {
    uuid        = "GPU-p0"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 0
    pcie_switch = "sw0"
  }
  gpu {
    uuid        = "GPU-p1"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 0
    pcie_switch = "sw1"
  }
  gpu {
    uuid        = "GPU-p2"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 1
    pcie_switch = "sw2"
  }
  gpu {
    uuid        = "GPU-p3"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 1
    pcie_switch = "sw3"
  }
  gpu {
    uuid        = "GPU-p4"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 0
    pcie_switch = "sw0"
  }
  gpu {
    uuid        = "GPU-p5"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 0
    pcie_switch = "sw1"
  }
  gpu {
    uuid        = "GPU-p6"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 1
    pcie_switch = "sw2"
  }
  gpu {
    uuid        = "GPU-p7"
    model       = "Tesla V100-PCIE-16GB"
    memory_mib  = 16384
    numa_node   = 1
    pcie_switch = "sw3"
  }
}
