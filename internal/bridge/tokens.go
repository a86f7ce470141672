package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/internal/periodic"
)

// tokenRenewCheck is how often the tokens are looked at for renewal.
const tokenRenewCheck = 30 * time.Second

// tokenIssuer gives bridged pods the service account tokens they project.
// A node has no API server to ask (it refuses a serviceAccountToken
// source), so the bridge asks: each such source of a pod becomes a Secret
// projection of a Secret sealed for the pod's node alone, holding a token
// from the TokenRequest API bound to the pod, renewed at 80% of its life
// as kubelet renews it; the node rewrites the file when the Secret
// changes.
type tokenIssuer struct {
	kube   kubernetes.Interface
	jetlet *client.Client

	// mu guards tokens: the nodes' pod workers add, the renewal loop
	// renews, the status watches forget.
	mu     sync.Mutex
	tokens map[string]*podToken // by its Secret's namespace/name
}

// podToken is one serviceAccountToken source of one pod, sealed for its
// node's xkey of when the pod was placed.
type podToken struct {
	node, xkey, namespace, secret string
	pod                           types.UID
	podName, account              string
	source                        corev1.ServiceAccountTokenProjection
	renewAt                       time.Time
}

func newTokenIssuer(kube kubernetes.Interface, jetlet *client.Client) *tokenIssuer {
	return &tokenIssuer{kube: kube, jetlet: jetlet, tokens: map[string]*podToken{}}
}

// tokenSecretName is the Secret that carries source i of volume of pod.
func tokenSecretName(pod types.UID, volume string, i int) string {
	return fmt.Sprintf("jetlet-token-%s-%s-%d", pod, volume, i)
}

// project replaces each serviceAccountToken source of pod (an intent's
// copy, bound for node, whose record's key is xkey) by its Secret's,
// issuing the token first.
func (ti *tokenIssuer) project(ctx context.Context, node, xkey string, pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for i := range v.Projected.Sources {
			src := v.Projected.Sources[i].ServiceAccountToken
			if src == nil {
				continue
			}
			tok := &podToken{node: node, xkey: xkey, namespace: pod.Namespace, secret: tokenSecretName(pod.UID, v.Name, i),
				pod: pod.UID, podName: pod.Name, account: pod.Spec.ServiceAccountName, source: *src}
			key := podKey(tok.namespace, tok.secret)
			ti.mu.Lock()
			issued := ti.tokens[key] != nil
			ti.mu.Unlock()
			if !issued {
				if err := ti.issue(ctx, tok); err != nil {
					return err
				}
				ti.mu.Lock()
				ti.tokens[key] = tok
				ti.mu.Unlock()
			}
			v.Projected.Sources[i] = corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: tok.secret},
				Items:                []corev1.KeyToPath{{Key: "token", Path: src.Path}},
			}}
		}
	}
	return nil
}

// issue asks the API server for tok's token and stores it sealed for
// tok's node; it sets tok.renewAt (tok is not shared yet, or the renewal
// loop holds it alone).
func (ti *tokenIssuer) issue(ctx context.Context, tok *podToken) error {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: tok.source.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: tok.podName, UID: tok.pod},
	}}
	if tok.source.Audience != "" {
		req.Spec.Audiences = []string{tok.source.Audience}
	}
	account := tok.account
	if account == "" {
		account = "default"
	}
	issued, err := ti.kube.CoreV1().ServiceAccounts(tok.namespace).CreateToken(ctx, account, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token of service account %s/%s for pod %s: %w", tok.namespace, account, tok.podName, err)
	}
	w, err := client.SealSecret(&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: tok.secret, Namespace: tok.namespace},
		Data:       map[string][]byte{"token": []byte(issued.Status.Token)},
	}, tok.node, tok.xkey)
	if err != nil {
		return err
	}
	if err := ti.jetlet.StoreConfigs(ctx, []*client.ConfigWrite{w}); err != nil {
		return err
	}
	now := time.Now()
	tok.renewAt = now.Add(issued.Status.ExpirationTimestamp.Sub(now) * 8 / 10)
	return nil
}

// forget drops the tokens of a pod that is gone.
func (ti *tokenIssuer) forget(pod types.UID) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	for key, tok := range ti.tokens {
		if tok.pod == pod {
			delete(ti.tokens, key)
		}
	}
}

// renew issues again each token at 80% of its life, until ctx ends.
func (ti *tokenIssuer) renew(ctx context.Context) {
	periodic.Every(ctx, tokenRenewCheck, func() { ti.renewDue(ctx) })
}

func (ti *tokenIssuer) renewDue(ctx context.Context) {
	now := time.Now()
	ti.mu.Lock()
	var due []podToken
	for _, tok := range ti.tokens {
		if now.After(tok.renewAt) {
			due = append(due, *tok)
		}
	}
	ti.mu.Unlock()
	for _, tok := range due {
		if err := ti.issue(ctx, &tok); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("pod", podKey(tok.namespace, tok.podName)).Msg("renewing a service account token")
			continue
		}
		ti.mu.Lock()
		if cur := ti.tokens[podKey(tok.namespace, tok.secret)]; cur != nil {
			cur.renewAt = tok.renewAt
		}
		ti.mu.Unlock()
	}
}
