package mydatabase

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/carotation"
	"github.com/mydb-dev/mydb/pkg/databaseca"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Events of a rotation of the database's CA.
const (
	ReasonCARotationStarted  = "CARotationStarted"
	ReasonCARotationSwitched = "CARotationSwitched"
	ReasonCARotated          = "CARotated"
)

// caRotationPoll is how soon a database is read again while its CA
// rotation waits for the instances: the managers report it, no event does.
const caRotationPoll = 2 * time.Second

// caState is the database's CA Secret as read, nil with the reason when
// it cannot be (reconcileSecret reports a lost one).
func (c *Controller) caState(db *examplev1.MyDatabase, f *findings) (*corev1.Secret, *databaseca.State, error) {
	secret := f.caSecret
	if secret == nil {
		var err error
		if secret, err = c.secretLister.Secrets(db.Namespace).Get(names.CASecret(db.Name)); err != nil {
			return nil, nil, err
		}
	}
	if !ownsData(db, secret) {
		return nil, nil, fmt.Errorf("the CA Secret %q is not the database's", secret.Name)
	}
	state, err := databaseca.ParseState(secret)
	if err != nil {
		return nil, nil, err
	}
	return secret, state, nil
}

// reconcileCertificates keeps what the CA Secret says in the Secrets the
// instances and applications read: the certificates Secret (the roots
// trusted now and an issuer of the root that signs; the kubelet updates
// the pods' projected volume with it, and each manager mints a new
// certificate when it sees another issuer or bundle), the CA bundle
// Secret, and the ca.crt of the credentials Secret, which is immutable
// and made again for a new bundle (from the instance Secret, as for a
// lost one).
func (c *Controller) reconcileCertificates(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	caSecret, state, err := c.caState(db, f)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if caSecret.Immutable != nil && *caSecret.Immutable {
		// Made by an earlier mydb: nothing in it can change, and a
		// rotation must write it. It is made again, mutable, through a
		// copy that stands in for it meanwhile.
		return c.migrateCASecret(ctx, db, caSecret, f)
	}
	bundle := state.Bundle()

	certificates, err := c.existingSecret(ctx, db, names.CertificatesSecret(db.Name), f)
	if err != nil {
		return err
	}
	want := map[string][]byte{engine.SecretKeyCA: bundle}
	if certificates != nil && issuedBy(certificates.Data[databaseca.KeyIssuerCert], state.Active.Cert) {
		want[databaseca.KeyIssuerCert], want[databaseca.KeyIssuerKey] = certificates.Data[databaseca.KeyIssuerCert], certificates.Data[databaseca.KeyIssuerKey]
	} else if instance, err := c.secretLister.Secrets(db.Namespace).Get(names.InstanceSecret(db.Name)); certificates == nil && err == nil &&
		issuedBy(instance.Data[databaseca.KeyIssuerCert], state.Active.Cert) {
		// The issuer the database's instances hold since its start.
		want[databaseca.KeyIssuerCert], want[databaseca.KeyIssuerKey] = instance.Data[databaseca.KeyIssuerCert], instance.Data[databaseca.KeyIssuerKey]
	} else {
		issuer, err := databaseca.NewIssuerData(state.Active, db.Namespace, db.Name, c.clock.Now())
		if err != nil {
			return err
		}
		want[databaseca.KeyIssuerCert], want[databaseca.KeyIssuerKey] = issuer[databaseca.KeyIssuerCert], issuer[databaseca.KeyIssuerKey]
	}
	// What the instances must hold a certificate of, once they read this
	// write: the cache may not show it yet to the rotation below.
	issuer, err := pki.ParseCerts(want[databaseca.KeyIssuerCert])
	if err != nil {
		return fmt.Errorf("the issuer: %w", err)
	}
	f.caSecret, f.caState, f.issuer = caSecret, state, pki.Fingerprint(issuer[0])
	if err := c.serverCertificate(ctx, db, certificates, want, f); err != nil {
		return err
	}
	if err := c.writeSecret(ctx, db, certificates, names.CertificatesSecret(db.Name), want, f); err != nil {
		return err
	}
	bundleSecret, err := c.existingSecret(ctx, db, names.CABundleSecret(db.Name), f)
	if err != nil {
		return err
	}
	if err := c.writeSecret(ctx, db, bundleSecret, names.CABundleSecret(db.Name), map[string][]byte{engine.SecretKeyCA: bundle}, f); err != nil {
		return err
	}
	app, err := c.existingSecret(ctx, db, names.Secret(db.Name), f)
	if err != nil || app == nil || bytes.Equal(app.Data[engine.SecretKeyCA], bundle) {
		return err
	}
	if instance, err := c.secretLister.Secrets(db.Namespace).Get(names.InstanceSecret(db.Name)); err != nil ||
		!bytes.Equal(instance.Data[engine.SecretKeyPassword], app.Data[engine.SecretKeyPassword]) {
		// Without the instance Secret's copy of its passwords (a legacy
		// or a lost one), the credentials Secret is not made again.
		return nil
	}
	err = c.kubeClient.CoreV1().Secrets(db.Namespace).Delete(ctx, app.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &app.UID, ResourceVersion: &app.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Deleted the credentials Secret for a new CA bundle; it is made again", "secret", app.Name)
	return nil
}

// serverCertificate adds to want (the certificates Secret's data) the
// server certificate of the user's own that spec.tls names, as the engines
// read it (databaseca.KeyServer*); one that is not usable is reported and
// the one served before, if any, is kept.
func (c *Controller) serverCertificate(ctx context.Context, db *examplev1.MyDatabase, certificates *corev1.Secret, want map[string][]byte, f *findings) error {
	if db.Spec.TLS == nil || db.Spec.TLS.ServerCertificateSecret == "" {
		return nil
	}
	keep := func(problem string) error {
		f.serverCertificateProblem = problem
		c.recorder.Event(db, corev1.EventTypeWarning, ReasonServerCertificateInvalid, problem)
		if certificates != nil {
			for _, key := range []string{databaseca.KeyServerCert, databaseca.KeyServerKey, databaseca.KeyServerCA} {
				if v, ok := certificates.Data[key]; ok {
					want[key] = v
				}
			}
		}
		return nil
	}
	name := db.Spec.TLS.ServerCertificateSecret
	// Not in the cache, which holds mydb's own Secrets only.
	secret, err := c.kubeClient.CoreV1().Secrets(db.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return keep(fmt.Sprintf("Secret %q (spec.tls.serverCertificateSecret) does not exist", name))
	}
	if err != nil {
		return err
	}
	if _, err := pki.CheckServerCertificate(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data[engine.SecretKeyCA], c.clock.Now()); err != nil {
		return keep(fmt.Sprintf("Secret %q (spec.tls.serverCertificateSecret): %v", name, err))
	}
	want[databaseca.KeyServerCert], want[databaseca.KeyServerKey], want[databaseca.KeyServerCA] =
		secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data[engine.SecretKeyCA]
	return nil
}

// issuedBy tells whether certPEM is an issuer root signed.
func issuedBy(certPEM []byte, root *x509.Certificate) bool {
	certs, err := pki.ParseCerts(certPEM)
	if err != nil {
		return false
	}
	return certs[0].CheckSignatureFrom(root) == nil
}

// writeSecret makes db's mutable Secret name hold data: created when
// existing is nil, updated (conditioned on its resourceVersion) when it
// holds anything else.
func (c *Controller) writeSecret(ctx context.Context, db *examplev1.MyDatabase, existing *corev1.Secret, name string, data map[string][]byte, f *findings) error {
	if existing == nil {
		_, err := c.createSecret(ctx, db, name, data, false, f)
		return err
	}
	if maps.EqualFunc(existing.Data, data, bytes.Equal) {
		return nil
	}
	secret := existing.DeepCopy()
	secret.Data = data
	if _, err := c.kubeClient.CoreV1().Secrets(db.Namespace).Update(ctx, secret, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return err
	}
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonUpdated, "Updated Secret %q", name)
	return nil
}

// migrateCASecret makes an immutable CA Secret mutable: a copy is written
// first, which the controller reads while the Secret is gone, then the
// Secret is deleted; reconcileSecret makes it again from the copy.
func (c *Controller) migrateCASecret(ctx context.Context, db *examplev1.MyDatabase, caSecret *corev1.Secret, f *findings) error {
	copyName := names.CASecretCopy(db.Name)
	existing, err := c.existingSecret(ctx, db, copyName, f)
	if err != nil {
		return err
	}
	if existing == nil {
		if existing, err = c.createSecret(ctx, db, copyName, caSecret.Data, true, f); err != nil {
			return err
		}
	}
	if !maps.EqualFunc(existing.Data, caSecret.Data, bytes.Equal) {
		return fmt.Errorf("the CA Secret %q and its copy %q differ: mydb leaves both as they are", caSecret.Name, copyName)
	}
	err = c.kubeClient.CoreV1().Secrets(db.Namespace).Delete(ctx, caSecret.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &caSecret.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// rotateCertificateAuthority takes the next step of a rotation of the
// database's CA (pkg/carotation), from the instances' reports, and says
// where it is in findings.
func (c *Controller) rotateCertificateAuthority(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	state := f.caState
	if state == nil {
		// No CA, or one reconcileCertificates is making mutable.
		return nil
	}
	caSecret := f.caSecret
	now := c.clock.Now()
	in := carotation.Input{
		Now: now, Phase: state.Phase, PhaseSince: state.Since,
		Requested: db.Annotations[names.RotateCAAnnotation], Handled: state.Handled,
		RenewAt: pki.RenewAt(state.Active.Cert), ActiveRoot: pki.Fingerprint(state.Active.Cert),
		MinOverlap: c.config.CARotationOverlap,
	}
	if state.Next != nil {
		in.NewRoot = pki.Fingerprint(state.Next.Cert)
	}
	// The issuer reconcileCertificates wrote, not the cache's: right
	// after the switch the cache may still hold the old one, which every
	// instance holds a certificate of.
	in.Issuer = f.issuer
	for i, pod := range f.pods {
		inst := carotation.Instance{Name: pod.Name}
		if i < len(f.reports) && f.reports[i] != nil && f.reports[i].Certificates != nil {
			inst.Reported, inst.Roots, inst.Issuer = true, f.reports[i].Certificates.Roots, f.reports[i].Certificates.Issuer
		}
		in.Instances = append(in.Instances, inst)
	}
	step := carotation.Next(in)
	f.certificateAuthority = &examplev1.CertificateAuthorityStatus{
		Fingerprint: pki.Fingerprint(state.Active.Cert),
		NotAfter:    &metav1.Time{Time: state.Active.Cert.NotAfter},
		Rotation:    string(state.Phase),
		Message:     step.Waiting,
	}
	if state.Phase == carotation.Idle && step.Waiting != "" {
		f.certificateAuthority.Rotation = string(carotation.Retiring)
	}
	if state.Phase == carotation.Idle && step.Waiting == "" && state.Handled != "" && !state.Since.IsZero() {
		f.certificateAuthority.LastRotationTime = &metav1.Time{Time: state.Since}
	}
	if state.Phase != carotation.Idle || step.Action != carotation.None || step.Waiting != "" {
		f.caRotating = true
	}
	if step.Action == carotation.None {
		return nil
	}
	data, annotations, err := state.Advance(caSecret, step.Action, db.Namespace, db.Name, db.Annotations[names.RotateCAAnnotation], now)
	if err != nil {
		return err
	}
	secret := caSecret.DeepCopy()
	secret.Data, secret.Annotations = data, annotations
	if _, err := c.kubeClient.CoreV1().Secrets(db.Namespace).Update(ctx, secret, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return err
	}
	switch step.Action {
	case carotation.Begin:
		why := "asked for (" + names.RotateCAAnnotation + ")"
		if step.Reason == carotation.ReasonExpiring {
			why = "the root is at two thirds of its life (it ends " + state.Active.Cert.NotAfter.UTC().Format(time.RFC3339) + ")"
		}
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCARotationStarted,
			"Rotating the database's CA, %s: a new root is trusted next to %s everywhere first", why, pki.Fingerprint(state.Active.Cert))
	case carotation.Switch:
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCARotationSwitched,
			"Every instance trusts the new root %s: it signs from now on (a new issuer; each instance mints a new certificate)", pki.Fingerprint(state.Next.Cert))
	case carotation.Finish:
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCARotated,
			"Every instance holds a certificate of root %s: the previous root %s is no longer trusted", pki.Fingerprint(state.Active.Cert), pki.Fingerprint(state.Previous))
	}
	return nil
}
