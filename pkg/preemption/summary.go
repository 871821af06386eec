package preemption

import (
	"fmt"
	"strings"
)

// summaryNames bounds how many names a summary lists per kind of victim.
const summaryNames = 3

// summary tells people what goes and where the preemptor lands: "evicting 2
// gangs (ns/a, ns/b): 8 pods, 64 GPUs, priority at most 10, to place ns/big
// in spine s0".
func (p *problem) summary(d *Decision) string {
	var gangs, pods, elastic []string
	members, nPods := 0, 0
	for _, v := range d.Victims {
		nPods += len(v.Pods)
		switch v.Kind {
		case WholeGang:
			gangs = append(gangs, v.Name)
		case PlainPod:
			pods = append(pods, v.Name)
		case ElasticMembers:
			elastic = append(elastic, v.Name)
			members += len(v.Pods)
		}
	}
	var parts []string
	if len(gangs) > 0 {
		parts = append(parts, fmt.Sprintf("%s (%s)", count(len(gangs), "gang"), names(gangs)))
	}
	if members > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s", count(members, "elastic member"), names(elastic)))
	}
	if len(pods) > 0 {
		parts = append(parts, fmt.Sprintf("%s (%s)", count(len(pods), "pod"), names(pods)))
	}
	return fmt.Sprintf("evicting %s: %s, %d GPUs, priority at most %d, to place %s in %s",
		strings.Join(parts, ", "), count(nPods, "pod"), d.Cost.GPUs, d.Cost.MaxPriority, p.req.Gang, d.Domain)
}

// names lists up to summaryNames names, then how many more.
func names(list []string) string {
	if len(list) <= summaryNames {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:summaryNames], ", "), len(list)-summaryNames)
}

// count renders "1 pod" or "3 pods".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
