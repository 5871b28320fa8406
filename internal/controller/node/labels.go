package node

import (
	"maps"
	"regexp"
	"slices"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// labelPair is a GA label and the deprecated beta label that mirrors it.
type labelPair struct{ ga, beta string }

// labelPairs are the instance-type and topology labels, GA first.
var (
	instanceTypeLabels = labelPair{v1.LabelInstanceTypeStable, v1.LabelInstanceType}
	zoneLabels         = labelPair{v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone}
	regionLabels       = labelPair{v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion}
	labelPairs         = []labelPair{instanceTypeLabels, zoneLabels, regionLabels}
)

// kubernetesNamespace matches label keys in a Kubernetes-reserved prefix
// (kubernetes.io/, k8s.io/ and their sub-domains), which providers' additional
// labels may not set.
var kubernetesNamespace = regexp.MustCompile(`(^|\.)(kubernetes\.io|k8s\.io)/`)

// skippedLabel is an additional label that initialization did not apply, and why.
type skippedLabel struct {
	key, value, reason string
}

// metadataLabels returns the labels initialization sets from md: both labels of
// each non-empty instance type, zone and region (overwriting), then the provider's
// additional labels except those in a Kubernetes namespace or already on the node.
// skipped lists the additional labels left out whose value would have differed
// (or that are reserved), for a warning.
func metadataLabels(existing map[string]string, md *cloudprovider.InstanceMetadata) (labels map[string]string, skipped []skippedLabel) {
	labels = map[string]string{}
	for _, p := range []struct {
		pair  labelPair
		value string
	}{{instanceTypeLabels, md.InstanceType}, {zoneLabels, md.Zone}, {regionLabels, md.Region}} {
		if p.value != "" {
			labels[p.pair.ga] = p.value
			labels[p.pair.beta] = p.value
		}
	}
	for _, key := range slices.Sorted(maps.Keys(md.AdditionalLabels)) {
		value := md.AdditionalLabels[key]
		if kubernetesNamespace.MatchString(key) {
			skipped = append(skipped, skippedLabel{key, value, "the key is in a Kubernetes-reserved namespace"})
			continue
		}
		if old, exists := existing[key]; exists {
			if old != value {
				skipped = append(skipped, skippedLabel{key, value, "the node already has the label with value " + old})
			}
			continue
		}
		labels[key] = value
	}
	return labels, skipped
}

// repairLabels returns the label changes that bring the beta labels in step with
// the GA labels, which are the source of truth (upstream copies beta to GA, so a
// user's edit of a GA label is reverted). A beta label without its GA label fills
// the GA label, so nodes labeled only with beta labels keep their topology.
func repairLabels(labels map[string]string) map[string]string {
	changes := map[string]string{}
	for _, p := range labelPairs {
		ga, hasGA := labels[p.ga]
		beta, hasBeta := labels[p.beta]
		switch {
		case hasGA && (!hasBeta || beta != ga):
			changes[p.beta] = ga
		case !hasGA && hasBeta:
			changes[p.ga] = beta
		}
	}
	return changes
}
