package embedded

import "github.com/jetlet/jetlet/runtime/crilabels"

// podIndex is the ids of the sandboxes (or containers) by the pod uid
// their labels carry (crilabels.LabelPodUID), so that a list whose label
// selector names a pod (its status, its garbage collection) looks at that
// pod's objects only, not at all of the node's. Guarded by Runtime.mu, as
// the map it indexes.
type podIndex map[string]map[string]struct{}

func (x podIndex) add(labels map[string]string, id string) {
	uid, ok := labels[crilabels.LabelPodUID]
	if !ok {
		return
	}
	if x[uid] == nil {
		x[uid] = map[string]struct{}{}
	}
	x[uid][id] = struct{}{}
}

func (x podIndex) remove(labels map[string]string, id string) {
	uid := labels[crilabels.LabelPodUID]
	delete(x[uid], id)
	if len(x[uid]) == 0 {
		delete(x, uid)
	}
}

// candidates are the objects of all a list filtered by selector need look
// at: those labelled with the pod uid selector names, or all of them.
func candidates[T any](x podIndex, all map[string]T, selector map[string]string) map[string]T {
	uid, ok := selector[crilabels.LabelPodUID]
	if !ok {
		return all
	}
	out := make(map[string]T, len(x[uid]))
	for id := range x[uid] {
		out[id] = all[id]
	}
	return out
}
