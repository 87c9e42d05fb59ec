package storeguard

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// MarkerKey is where the marker lives in mydb's etcd, beside (not within)
// the resources under prefix.
func MarkerKey(prefix string) string {
	return path.Join("/", prefix, "store-identity")
}

// EtcdStore keeps the marker in mydb's etcd.
type EtcdStore struct {
	Client *clientv3.Client
	Key    string
	// Timeout bounds each request, so a hung etcd reads as unreachable.
	Timeout time.Duration
}

// Read returns the marker and the store's revision.
func (s EtcdStore) Read(ctx context.Context) (StoreState, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	resp, err := s.Client.Get(ctx, s.Key)
	if err != nil {
		return StoreState{}, err
	}
	state := StoreState{Revision: resp.Header.Revision}
	if len(resp.Kvs) == 0 {
		return state, nil
	}
	var m Marker
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil || m.UID == "" {
		return StoreState{}, fmt.Errorf("the store identity at %s does not parse (%q): %v", s.Key, resp.Kvs[0].Value, err)
	}
	state.Marker, state.ModRevision = &m, resp.Kvs[0].ModRevision
	return state, nil
}

// Write puts m if the key is still at modRevision (0: absent).
func (s EtcdStore) Write(ctx context.Context, m Marker, modRevision int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	value, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	resp, err := s.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(s.Key), "=", modRevision)).
		Then(clientv3.OpPut(s.Key, string(value))).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// Keys of the record ConfigMap's data.
const (
	recordUID      = "uid"
	recordSequence = "sequence"
)

// ConfigMapRecord keeps the record in a ConfigMap of the main cluster.
type ConfigMapRecord struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Recorder  record.EventRecorder
}

func (r ConfigMapRecord) String() string {
	return fmt.Sprintf("ConfigMap %s/%s", r.Namespace, r.Name)
}

// KubectlArgs names the ConfigMap for kubectl.
func (r ConfigMapRecord) KubectlArgs() string {
	return fmt.Sprintf("-n %s configmap/%s", r.Namespace, r.Name)
}

// Get reads the ConfigMap; nil when there is none.
func (r ConfigMapRecord) Get(ctx context.Context) (*Recorded, error) {
	cm, err := r.Client.CoreV1().ConfigMaps(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	seq, err := strconv.ParseInt(cm.Data[recordSequence], 10, 64)
	if err != nil || cm.Data[recordUID] == "" {
		// A record that does not parse protects nothing: treat it as one
		// no store matches, so an operator looks.
		return &Recorded{Marker: Marker{UID: "unparseable record: " + cm.Data[recordUID], Sequence: seq},
			Accept: cm.Annotations[AcceptAnnotation], ResourceVersion: cm.ResourceVersion}, nil
	}
	return &Recorded{Marker: Marker{UID: cm.Data[recordUID], Sequence: seq},
		Accept: cm.Annotations[AcceptAnnotation], ResourceVersion: cm.ResourceVersion}, nil
}

func (r ConfigMapRecord) configMap(m Marker) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "mydb", "app.kubernetes.io/component": "store-guard"}},
		Data: map[string]string{recordUID: m.UID, recordSequence: strconv.FormatInt(m.Sequence, 10)},
	}
}

// Create writes a new record.
func (r ConfigMapRecord) Create(ctx context.Context, m Marker) error {
	_, err := r.Client.CoreV1().ConfigMaps(r.Namespace).Create(ctx, r.configMap(m), metav1.CreateOptions{FieldManager: "mydb-store-guard"})
	return err
}

// Update replaces the record read as rec with m, without AcceptAnnotation.
func (r ConfigMapRecord) Update(ctx context.Context, rec Recorded, m Marker) error {
	cm := r.configMap(m)
	cm.ResourceVersion = rec.ResourceVersion
	_, err := r.Client.CoreV1().ConfigMaps(r.Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "mydb-store-guard"})
	return err
}

// Event reports on the ConfigMap.
func (r ConfigMapRecord) Event(eventType, reason, message string) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Event(&corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: r.Namespace, Name: r.Name},
		eventType, reason, message)
}
