package synergy

import "math"

// Cache-model parameters per model, from Synergy's repository
// (github msr-fiddle/synergy at 1bb2bed6; docs/synergy/profiling.md):
//
//   - Datasets: the deployment scripts train the image models on ImageNet,
//     gnmt on WMT16 en-de, transformer (Transformer-XL) on WikiText-103 and
//     lstm on WikiText-2 (simulator/deployment/docker_script_multi.sh); the
//     offline profiler sizes them as (GB, samples) ImageNet 140 and
//     1,281,167 (its commented-out constants), "wmt" 8 and 3,498,161, any
//     "wikitext" path 1.3 and 537,728 (src/profiler/offline_profiler.py,
//     get_dataset_stats and estimate_speed). m5 (FMA) and deepspeech
//     (LibriSpeech) have no size there: no cache model.
//   - Steps per epoch: the profiler's num_samples / num_gpus / batch_size
//     (per-GPU batch, rounded down), with the batch of the model's profile
//     (profiles.json, the reference's simulator/models).
//   - Storage: the reference cluster gives each server 500 MB/s
//     (simulator/configs/default_cluster.ini, sspeed_per_server) and a job
//     500/8 MB/s per GPU at the proportional share (jobs/model.py,
//     use_default_scores); the profiler measures a disk with hdparm.

// ReferenceServerStorageGBps is a server's storage bandwidth in Synergy's
// reference cluster configuration (500 MB/s).
const ReferenceServerStorageGBps = 0.5

// Dataset is a training set as Synergy's offline profiler sizes it.
type Dataset struct {
	Name    string
	GB      float64
	Samples float64
}

var (
	datasetImageNet = Dataset{"ImageNet-1k (train)", 140, 1281167}
	datasetWMT16    = Dataset{"WMT16 en-de", 8, 3498161}
	datasetWikiText = Dataset{"WikiText", 1.3, 537728}
)

// ModelDatasets is each Synergy model's training set (Synergy's model
// names, as Lookup takes them; Gavel's models train on other data and have
// none).
var ModelDatasets = map[string]Dataset{
	"alexnet":     datasetImageNet,
	"res18":       datasetImageNet,
	"res50":       datasetImageNet,
	"mobilenet":   datasetImageNet,
	"shufflenet":  datasetImageNet,
	"gnmt":        datasetWMT16,
	"transformer": datasetWikiText,
	"lstm":        datasetWikiText,
}

// CacheFor is the cache model of a Synergy model on gpus GPUs reading
// misses at storageGBps (the job's share of its server's storage, e.g.
// ReferenceServerStorageGBps × gpus / GPUs per server, the reference's
// proportional share), or nil where nothing is known: a model without a
// dataset in ModelDatasets or a profile batch in the embedded table, gpus
// < 1, or storageGBps not a positive number.
func CacheFor(model string, gpus int, storageGBps float64) *CacheModel {
	d, ok := ModelDatasets[model]
	if !ok || gpus < 1 || !(storageGBps > 0) || math.IsInf(storageGBps, 0) {
		return nil
	}
	set := Default().Sets["models"]
	if set == nil {
		return nil
	}
	p, err := set.Lookup(model, gpus)
	if err != nil || p.Batch < 1 {
		return nil
	}
	steps := math.Max(1, math.Floor(d.Samples/float64(gpus)/float64(p.Batch)))
	return &CacheModel{DatasetGB: d.GB, StepsPerEpoch: steps, StorageGBps: storageGBps}
}
