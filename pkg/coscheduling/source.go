package coscheduling

// Gang sources: the one seam between the plugin and the APIs that define
// gangs. Each API has a source that reads its PodGroups from one informer's
// lister and adapts them to gang.Spec; everything else in the plugin asks
// pl.sources and works on Specs, whichever API a gang comes from.

import (
	"errors"
	"fmt"
	"time"

	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"

	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// source finds the gangs of one API.
type source interface {
	// spec returns the gang's Spec, adapted from its API object. The error
	// satisfies apierrors.IsNotFound if the object does not exist, and
	// wraps errNotWatched if this scheduler does not watch the API.
	spec(key gang.Key) (*gang.Spec, error)
	// created returns when the gang's object was created, without
	// adapting it: QueueSort asks on every comparison.
	created(key gang.Key) (time.Time, bool)
}

// sources holds one source per API, indexed by gang.API.
type sources [2]source

// spec returns a gang's Spec from the source of its API.
func (s *sources) spec(key gang.Key) (*gang.Spec, error) { return s[key.API].spec(key) }

// created returns when a gang's object was created.
func (s *sources) created(key gang.Key) (time.Time, bool) { return s[key.API].created(key) }

// lookup returns a gang's Spec if its object exists. Callers that only say
// something about a gang (an Event, a metric) use it; admission uses spec.
func (pl *Plugin) lookup(key gang.Key) (*gang.Spec, bool) {
	s, err := pl.sources.spec(key)
	return s, err == nil
}

// xk8sSource reads scheduler-plugins' PodGroups.
type xk8sSource struct{ lister pglisters.PodGroupLister }

func (s xk8sSource) spec(key gang.Key) (*gang.Spec, error) {
	pg, err := s.lister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil, err
	}
	return gang.FromPodGroup(pg), nil
}

func (s xk8sSource) created(key gang.Key) (time.Time, bool) {
	pg, err := s.lister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return time.Time{}, false
	}
	return pg.CreationTimestamp.Time, true
}

// nativeSource reads Kubernetes' own PodGroups. A PodGroup being deleted
// still defines its gang: the API server keeps it, with the finalizer
// scheduling.k8s.io/podgroup-protection, until no active pod names it, and
// its pods are scheduled as a gang until then, as kube-scheduler's own
// gang scheduling does.
type nativeSource struct {
	lister schedulinglisters.PodGroupLister
}

func (s nativeSource) spec(key gang.Key) (*gang.Spec, error) {
	pg, err := s.lister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil, err
	}
	return gang.FromNativePodGroup(pg), nil
}

func (s nativeSource) created(key gang.Key) (time.Time, bool) {
	pg, err := s.lister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return time.Time{}, false
	}
	return pg.CreationTimestamp.Time, true
}

// errNotWatched is the error of a source whose API this scheduler does not
// watch.
var errNotWatched = errors.New("not watched")

// unwatched is the source of an API this scheduler does not watch.
type unwatched struct {
	// why says why, and what would change it.
	why string
}

func (u unwatched) spec(gang.Key) (*gang.Spec, error) {
	return nil, fmt.Errorf("%w: %s", errNotWatched, u.why)
}

func (u unwatched) created(gang.Key) (time.Time, bool) { return time.Time{}, false }

// joinedBy says how a pod joins the gang, for messages.
func joinedBy(key gang.Key) string {
	if key.API == gang.Native {
		return "whose spec.schedulingGroup.podGroupName is " + key.Name
	}
	return fmt.Sprintf("labelled %s=%s", scheduling.PodGroupLabel, key.Name)
}

// howToLeave says how a pod stops naming the gang, for messages.
func howToLeave(key gang.Key) string {
	if key.API == gang.Native {
		return "or recreate the pod without spec.schedulingGroup (the field cannot be changed)"
	}
	return "or remove the label " + scheduling.PodGroupLabel + " from the pod"
}
