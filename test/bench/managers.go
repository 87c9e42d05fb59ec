package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/databaseca"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// simulatedManagers answer as the instance managers of every database pod
// of one namespace, in this one process: a listener on each pod's IP
// (kwok gives each a loopback 127.1.x.y) at the managers' port, serving
// mutual TLS with a certificate the database's issuer signs for the pod's
// name, as mydb-instance mints its own. Each says its instance is a ready
// primary (the one the database's status names, else ordinal 0) or a
// ready, streaming replica of it once the primary is served (a replica of
// a primary not there yet is cloning, with no position, as a real one
// would be), on GET /v1/status and on the health stream, and counts what
// it is asked. The
// controller cannot tell them from real managers; they cost it what real
// ones would, and the engine nothing.
type simulatedManagers struct {
	kube      kubernetes.Interface
	mydb      clientset.Interface
	namespace string
	// primaries are the databases' primaries as their status names them.
	primaries sync.Map // database name -> pod name

	mu       sync.Mutex
	pods     map[string]*simulatedPod // by pod name
	issuers  map[string]*pki.KeyPair  // by database
	roots    map[string][]string      // the fingerprints of each database's roots
	statusN  atomic.Int64
	linesN   atomic.Int64
	streamsN atomic.Int64 // open now
	opened   atomic.Int64
	otherN   atomic.Int64
	failures atomic.Int64
	lastErr  atomic.Value
}

type simulatedPod struct {
	name, db, uid, ip string
	listener          net.Listener
	server            *http.Server
	cert              *tls.Certificate
}

// counts are what the managers were asked, in total.
type managerCounts struct {
	Status, Lines, Opened, Other int64
	Streams                      int64
}

func (m *simulatedManagers) counts() managerCounts {
	return managerCounts{Status: m.statusN.Load(), Lines: m.linesN.Load(), Opened: m.opened.Load(), Other: m.otherN.Load(), Streams: m.streamsN.Load()}
}

// run serves the namespace's pods until ctx ends.
func (m *simulatedManagers) run(ctx context.Context) {
	m.pods, m.issuers, m.roots = map[string]*simulatedPod{}, map[string]*pki.KeyPair{}, map[string][]string{}
	factory := informers.NewSharedInformerFactoryWithOptions(m.kube, 0, informers.WithNamespace(m.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = names.LabelComponent + "=" + names.ComponentDatabase
		}))
	pods := factory.Core().V1().Pods().Informer()
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.sync(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { m.sync(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				m.drop(p.Name)
			}
		},
	})
	dbs := mydbinformers.NewSharedInformerFactoryWithOptions(m.mydb, 0, mydbinformers.WithNamespace(m.namespace))
	_, _ = dbs.Example().V1().MyDatabases().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.sawDatabase(obj) },
		UpdateFunc: func(_, obj any) { m.sawDatabase(obj) },
	})
	factory.Start(ctx.Done())
	dbs.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	dbs.Shutdown()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.pods {
		m.dropLocked(name)
	}
}

func (m *simulatedManagers) sawDatabase(obj any) {
	if db, ok := obj.(*examplev1.MyDatabase); ok && db.Status.CurrentPrimary != "" {
		m.primaries.Store(db.Name, db.Status.CurrentPrimary)
	}
}

func (m *simulatedManagers) fail(err error) {
	m.failures.Add(1)
	m.lastErr.Store(err.Error())
}

// sync serves pod at its IP, once it has one.
func (m *simulatedManagers) sync(pod *corev1.Pod) {
	ip := pod.Status.PodIP
	db := pod.Labels[names.LabelInstance]
	if ip == "" || db == "" || pod.DeletionTimestamp != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pods[pod.Name]; p != nil {
		if p.ip == ip && p.uid == string(pod.UID) {
			return
		}
		m.dropLocked(pod.Name)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(api.Port)))
	if err != nil {
		m.fail(fmt.Errorf("listening for %s at %s: %w", pod.Name, ip, err))
		return
	}
	p := &simulatedPod{name: pod.Name, db: db, uid: string(pod.UID), ip: ip, listener: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathStatus, func(w http.ResponseWriter, r *http.Request) {
		m.statusN.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m.status(p))
	})
	mux.HandleFunc("GET "+api.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		m.opened.Add(1)
		m.streamsN.Add(1)
		defer m.streamsN.Add(-1)
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		tick := time.NewTicker(api.HealthInterval)
		defer tick.Stop()
		for {
			if enc.Encode(api.HealthOf(m.status(p))) != nil || rc.Flush() != nil {
				return
			}
			m.linesN.Add(1)
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Anything else the controller asks (an archive, objects): done.
		m.otherN.Add(1)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{}"))
	})
	p.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAnyClientCert,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return m.certificate(p) }}}
	m.pods[pod.Name] = p
	go func() { _ = p.server.ServeTLS(ln, "", "") }()
}

func (m *simulatedManagers) drop(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropLocked(name)
}

func (m *simulatedManagers) dropLocked(name string) {
	if p := m.pods[name]; p != nil {
		_ = p.server.Close()
		delete(m.pods, name)
	}
}

// certificate is pod's server certificate, minted once from its database's
// issuer (the certificates Secret mydb keeps for the instances).
func (m *simulatedManagers) certificate(p *simulatedPod) (*tls.Certificate, error) {
	m.mu.Lock()
	cert, issuer := p.cert, m.issuers[p.db]
	m.mu.Unlock()
	if cert != nil {
		return cert, nil
	}
	if issuer == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		secret, err := m.kube.CoreV1().Secrets(m.namespace).Get(ctx, names.CertificatesSecret(p.db), metav1.GetOptions{})
		if err != nil {
			m.fail(err)
			return nil, err
		}
		if issuer, err = pki.ParseKeyPair(secret.Data[databaseca.KeyIssuerCert], secret.Data[databaseca.KeyIssuerKey]); err != nil {
			m.fail(err)
			return nil, err
		}
		roots, err := pki.ParseCerts(secret.Data[databaseca.KeyCert])
		if err != nil || len(roots) == 0 {
			err = errors.Join(errors.New("no CA certificate in the certificates Secret"), err)
			m.fail(err)
			return nil, err
		}
		m.mu.Lock()
		m.issuers[p.db] = issuer
		m.roots[p.db] = fingerprints(roots)
		m.mu.Unlock()
	}
	leaf, err := issuer.Issue(instance.InstanceLeaf(p.name, p.db, m.namespace, p.ip), time.Now())
	if err != nil {
		m.fail(err)
		return nil, err
	}
	cert = leaf.TLSCertificate(issuer.Cert)
	m.mu.Lock()
	p.cert = cert
	m.mu.Unlock()
	return cert, nil
}

func fingerprints(certs []*x509.Certificate) []string {
	out := make([]string, len(certs))
	for i, c := range certs {
		out[i] = pki.Fingerprint(c)
	}
	return out
}

// status is what pod's manager says: a ready primary for ordinal 0, a ready
// replica streaming from it for the others, on an idle database.
func (m *simulatedManagers) status(p *simulatedPod) api.Status {
	primary := names.StatefulSet(p.db) + "-0"
	if named, ok := m.primaries.Load(p.db); ok {
		primary = named.(string)
	}
	s := api.Status{Name: p.name, PodUID: p.uid, Engine: "postgres", Role: api.RoleReplica, Primary: primary,
		Ready: true, EngineRunning: true, EnginePID: 100, SystemIdentifier: "7400000000000000000",
		Position: &api.Position{Timeline: 1, LSN: "0/3000060"}}
	m.mu.Lock()
	_, primaryServed := m.pods[primary]
	m.mu.Unlock()
	switch {
	case p.name == primary:
		s.Role = api.RolePrimary
	case !primaryServed:
		s.Ready, s.Reason, s.EngineRunning, s.Position = false, "cloning: the primary "+primary+" does not answer", false, nil
	default:
		zero, lag := int64(0), 0.0
		s.Streaming, s.Upstream, s.LagBytes, s.LagSeconds = true, primary+":5432", &zero, &lag
	}
	m.mu.Lock()
	if issuer := m.issuers[p.db]; issuer != nil && p.cert != nil {
		s.Certificates = &api.Certificates{Roots: m.roots[p.db], Issuer: pki.Fingerprint(issuer.Cert), NotAfter: p.cert.Leaf.NotAfter}
	}
	m.mu.Unlock()
	return s
}

// listening is how many pods are served.
func (m *simulatedManagers) listening() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pods)
}

func (m *simulatedManagers) lastError() string {
	if s, ok := m.lastErr.Load().(string); ok {
		return strings.TrimSpace(s)
	}
	return ""
}
