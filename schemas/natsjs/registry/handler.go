package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas/imageref"
	"github.com/rs/zerolog"
)

// The OCI distribution error codes this registry answers.
const (
	codeManifestUnknown = "MANIFEST_UNKNOWN"
	codeBlobUnknown     = "BLOB_UNKNOWN"
	codeNameUnknown     = "NAME_UNKNOWN"
	codeNameInvalid     = "NAME_INVALID"
	codeDigestInvalid   = "DIGEST_INVALID"
	codeUnsupported     = "UNSUPPORTED"
	// codeUnavailable is distribution's: the store did not answer. A 5xx
	// sends containerd to its next host for the image.
	codeUnavailable = "UNAVAILABLE"
)

// handler serves the OCI distribution API's reads from the store:
// GET /v2/, GET|HEAD /v2/<name>/manifests/<tag|digest> and
// GET|HEAD /v2/<name>/blobs/<digest>. It is a mirror of every registry:
// containerd asks a mirror with ?ns=<registry host>, and the reference
// looked up is <ns>/<name>:<tag>, normalised; without ns it is <name>:<tag>,
// normalised ("library/busybox" is docker.io's). Blobs and manifests by
// digest are one content-addressed namespace, served under any name.
// Its fields are set before it serves and never changed: the requests'
// goroutines share them read only.
type handler struct {
	store   jetstream.ObjectStore
	chunks  chunkReader
	timeout time.Duration // of each lookup
	log     zerolog.Logger
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2")
	if !ok || rest != "" && rest[0] != '/' {
		writeError(w, http.StatusNotFound, codeUnsupported, "not the OCI distribution API: it is under /v2/")
		return
	}
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, codeUnsupported, "this registry is read only: images are pushed with jetlet image push")
		return
	}
	rest = strings.TrimPrefix(rest, "/")
	if rest == "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "2")
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte("{}"))
		}
		return
	}
	if name, ref, ok := cutLast(rest, "/manifests/"); ok {
		h.manifest(w, r, qualified(r, name), ref)
		return
	}
	if name, digest, ok := cutLast(rest, "/blobs/"); ok {
		h.blob(w, r, qualified(r, name), digest)
		return
	}
	writeError(w, http.StatusNotFound, codeUnsupported, "only manifests and blobs are served")
}

// qualified is the repository name a request asks for: with the registry
// host of containerd's ns parameter in front, if any.
func qualified(r *http.Request, name string) string {
	if ns := r.URL.Query().Get("ns"); ns != "" {
		return ns + "/" + name
	}
	return name
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i <= 0 || i+len(sep) == len(s) {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

func (h *handler) manifest(w http.ResponseWriter, r *http.Request, name, reference string) {
	if strings.Contains(reference, ":") {
		digest, err := v1.NewHash(reference)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeDigestInvalid, err.Error())
			return
		}
		if _, err := imageref.Parse(name + "@" + digest.String()); err != nil {
			writeError(w, http.StatusBadRequest, codeNameInvalid, err.Error())
			return
		}
		info, found := h.lookupBlob(r.Context(), w, digest, codeManifestUnknown)
		if !found {
			return
		}
		mediaType := info.Metadata[metaMediaType]
		if !isManifest(mediaType) {
			writeError(w, http.StatusNotFound, codeManifestUnknown, digest.String()+" is a blob, not a manifest")
			return
		}
		h.send(w, r, info, digest, mediaType)
		return
	}
	parsed, err := imageref.Parse(name + ":" + reference)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeNameInvalid, err.Error())
		return
	}
	ref := parsed.String()
	info, found, err := h.lookup(r.Context(), RefObject(ref))
	if err != nil {
		h.unavailable(w, ref, err)
		return
	}
	if !found {
		h.unknownRef(r.Context(), w, parsed)
		return
	}
	im, ok := ImageFromObject(info)
	if !ok {
		h.log.Error().Str("ref", ref).Msg("a reference's object does not say which manifest it names; push it again")
		writeError(w, http.StatusNotFound, codeManifestUnknown, "the store's reference "+ref+" is unreadable")
		return
	}
	digest, _ := v1.NewHash(im.Digest) // ImageFromObject checked it
	blob, found := h.lookupBlob(r.Context(), w, digest, codeManifestUnknown)
	if found {
		h.send(w, r, blob, digest, im.MediaType)
	}
}

// unknownRef answers a reference the store does not hold: MANIFEST_UNKNOWN
// in a repository it holds other references of, NAME_UNKNOWN otherwise.
func (h *handler) unknownRef(ctx context.Context, w http.ResponseWriter, parsed imageref.Reference) {
	ref, repo := parsed.String(), parsed.Repo()
	_, known, err := h.lookup(ctx, RepositoryObject(repo))
	switch {
	case err != nil:
		h.unavailable(w, ref, err)
	case known:
		writeError(w, http.StatusNotFound, codeManifestUnknown, ref+" is not in the store")
	default:
		writeError(w, http.StatusNotFound, codeNameUnknown, "the store holds no image of "+repo)
	}
}

func (h *handler) blob(w http.ResponseWriter, r *http.Request, name, ref string) {
	digest, err := v1.NewHash(ref)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeDigestInvalid, err.Error())
		return
	}
	if _, err := imageref.Normalize(name + "@" + digest.String()); err != nil {
		writeError(w, http.StatusBadRequest, codeNameInvalid, err.Error())
		return
	}
	if info, found := h.lookupBlob(r.Context(), w, digest, codeBlobUnknown); found {
		h.send(w, r, info, digest, "application/octet-stream")
	}
}

// lookupBlob finds the object of digest, or answers the request (404 with
// code, or 503) and returns false.
func (h *handler) lookupBlob(ctx context.Context, w http.ResponseWriter, digest v1.Hash, code string) (*jetstream.ObjectInfo, bool) {
	info, found, err := h.lookup(ctx, BlobObject(digest))
	if err != nil {
		h.unavailable(w, digest.String(), err)
		return nil, false
	}
	if !found {
		writeError(w, http.StatusNotFound, code, digest.String()+" is not in the store")
		return nil, false
	}
	if !holds(info, digest, int64(info.Size)) {
		h.log.Error().Str("digest", digest.String()).Str("content_digest", info.Digest).Msg("the store's object of a blob holds other content; push its image again")
		writeError(w, http.StatusNotFound, code, digest.String()+" is stored with other content")
		return nil, false
	}
	return info, true
}

// lookup gets the info of the object name; found is false when there is
// none.
func (h *handler) lookup(ctx context.Context, name string) (info *jetstream.ObjectInfo, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	info, err = h.store.GetInfo(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return info, true, nil
}

// send answers with the object's content, streamed from the store: its
// headers first, then the body, a window at a time. An error past the
// headers cuts the connection, so that the client sees a short body rather
// than a whole one.
func (h *handler) send(w http.ResponseWriter, r *http.Request, info *jetstream.ObjectInfo, digest v1.Hash, mediaType string) {
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", digest.String())
	w.Header().Set("Content-Length", strconv.FormatUint(info.Size, 10))
	w.Header().Set("Etag", `"`+digest.String()+`"`)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if err := h.chunks.copyObject(r.Context(), info, w); err != nil {
		if r.Context().Err() == nil {
			h.log.Warn().Err(err).Str("digest", digest.String()).Msg("serving a blob from the store failed; the response is cut short")
		}
		panic(http.ErrAbortHandler)
	}
}

func (h *handler) unavailable(w http.ResponseWriter, what string, err error) {
	h.log.Warn().Err(err).Str("looking_up", what).Msg("the image store did not answer")
	writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the image store did not answer: "+err.Error())
}

// writeError answers with the OCI distribution error body.
func writeError(w http.ResponseWriter, status int, code, message string) {
	type ociError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct {
		Errors []ociError `json:"errors"`
	}{[]ociError{{code, message}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
