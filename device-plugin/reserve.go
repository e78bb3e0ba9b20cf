package deviceplugin

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/nomad/plugins/device"
)

// reserve builds the environment for ids. Nomad calls Reserve once per
// allocated device group, so ids are normally all exclusive GPUs of one model
// or all shares of one profile; reserve still checks any mix it is handed and
// refuses what one CUDA process cannot be given:
//
//   - an unknown or duplicated id, or a GPU in MIG mode (its MIG devices are
//     the devices);
//   - an exclusive GPU together with a share of the same GPU;
//   - exclusive GPUs or MIG devices together with shares (of other GPUs): the MPS variables
//     would apply to every GPU the process sees;
//   - shares of more than one GPU: one process reaches one MPS control daemon
//     (one pipe directory) and has one active thread percentage;
//   - shares of one GPU whose active thread percentages add up to more than
//     100, or whose memory limits add up to more than the GPU's memory.
func reserve(inv *Inventory, s *settings, ids []string) (*device.ContainerReservation, error) {
	if len(ids) == 0 {
		return &device.ContainerReservation{}, nil
	}
	shares := inv.shares(s.MPSProfiles)
	seen := map[string]bool{}
	var exclusive []string
	var picked []share
	for _, id := range ids {
		if seen[id] {
			return nil, fmt.Errorf("reserve: device id %q requested twice", id)
		}
		seen[id] = true
		if g := inv.gpu(id); g != nil {
			if g.MIG {
				return nil, fmt.Errorf("reserve: GPU %s is in MIG mode: CUDA sees no device on it; reserve its MIG devices", id)
			}
			exclusive = append(exclusive, id)
			continue
		}
		if inv.mig(id) != nil {
			// A MIG instance is exclusive too; CUDA takes its "MIG-" uuid.
			exclusive = append(exclusive, id)
			continue
		}
		if sh, ok := shares[id]; ok {
			picked = append(picked, sh)
			continue
		}
		return nil, fmt.Errorf("reserve: unknown device id %q", id)
	}
	if len(picked) == 0 {
		v := strings.Join(exclusive, ",")
		return &device.ContainerReservation{Envs: map[string]string{
			"CUDA_VISIBLE_DEVICES":   v,
			"NVIDIA_VISIBLE_DEVICES": v,
		}}, nil
	}
	gpu := picked[0].gpu
	for _, sh := range picked {
		if seen[sh.gpu.UUID] {
			return nil, fmt.Errorf("reserve: GPU %s requested both exclusively and as MPS share %s", sh.gpu.UUID, shareID(sh.gpu.UUID, sh.profile.Name, sh.k))
		}
		if sh.gpu.UUID != gpu.UUID {
			return nil, fmt.Errorf("reserve: MPS shares of different GPUs (%s, %s) cannot be given to one task: one process reaches one MPS daemon", gpu.UUID, sh.gpu.UUID)
		}
	}
	if len(exclusive) > 0 {
		return nil, fmt.Errorf("reserve: exclusive GPUs (%s) cannot be mixed with MPS shares of GPU %s in one task", strings.Join(exclusive, ","), gpu.UUID)
	}
	pct, mem := 0, uint64(0)
	for _, sh := range picked {
		pct += sh.profile.ActiveThreadPercentage
		mem += sh.memMiB
	}
	if pct > 100 {
		return nil, fmt.Errorf("reserve: MPS shares of GPU %s add up to %d%% active threads (> 100%%)", gpu.UUID, pct)
	}
	if gpu.MemoryMiB > 0 && mem > gpu.MemoryMiB {
		return nil, fmt.Errorf("reserve: MPS shares of GPU %s add up to %d MiB pinned memory, more than its %d MiB", gpu.UUID, mem, gpu.MemoryMiB)
	}
	pipe := filepath.Join(s.MPSPipeDir, gpu.UUID)
	logDir := filepath.Join(s.MPSLogDir, gpu.UUID)
	env := map[string]string{
		"CUDA_VISIBLE_DEVICES":              gpu.UUID,
		"NVIDIA_VISIBLE_DEVICES":            gpu.UUID,
		"CUDA_MPS_PIPE_DIRECTORY":           pipe,
		"CUDA_MPS_LOG_DIRECTORY":            logDir,
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": fmt.Sprint(pct),
		// Device ordinal 0: the only device the task sees.
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": fmt.Sprintf("0=%dM", mem),
	}
	return &device.ContainerReservation{
		Envs: env,
		// Containers need the daemon's pipe directory; raw_exec ignores mounts.
		Mounts: []*device.Mount{{TaskPath: pipe, HostPath: pipe}},
	}, nil
}
