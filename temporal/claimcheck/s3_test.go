package claimcheck

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// The signer gives the signature of AWS's published example (IAM
// ListUsers, "Create a signed AWS API request", General Reference).
func TestSignV4IAMExample(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	when := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	creq, _ := canonicalRequest(withDate(req, "20150830T123600Z"), emptySHA256)
	sum := sha256.Sum256([]byte(creq))
	assert.Equal(t, "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59", hex.EncodeToString(sum[:]), "the canonical request's hash:\n%s", creq)
	signV4(req, emptySHA256, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "iam", when)
	assert.Equal(t, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "+
		"SignedHeaders=content-type;host;x-amz-date, "+
		"Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7", req.Header.Get("Authorization"))
}

// The signer gives the signature of the S3 documentation's example (GET
// Object, "Signature Calculations for the Authorization Header:
// Transferring Payload in a Single Chunk").
func TestSignV4S3GetObjectExample(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	require.NoError(t, err)
	req.Header.Set("Range", "bytes=0-9")
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	signV4(req, emptySHA256, "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3", time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC))
	assert.Equal(t, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "+
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "+
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", req.Header.Get("Authorization"))
}

func withDate(req *http.Request, d string) *http.Request {
	r := req.Clone(context.Background())
	r.Header.Set("X-Amz-Date", d)
	return r
}

const (
	testAccessKey = "AKIDTEST"
	testSecret    = "the-secret/key+for-tests"
	testToken     = "session-token-value"
)

// bucket is an S3 bucket in memory, behind an httptest server, that
// checks each request's Signature Version 4 with its own computation from
// the request as it came in, and answers as S3 does.
type bucket struct {
	t        *testing.T
	name     string
	token    string // the session token every request must carry, when not empty
	mu       sync.Mutex
	objects  map[string][]byte
	requests int
	// override, when set, answers instead of the bucket.
	override func(w http.ResponseWriter, r *http.Request) bool
}

func newBucket(t *testing.T) (*bucket, *httptest.Server) {
	b := &bucket{t: t, name: "payloads", objects: map[string][]byte{}}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>1</RequestId></Error>`, code, msg)
}

func (b *bucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.requests++
	b.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s3Error(w, 400, "IncompleteBody", err.Error())
		return
	}
	if reason := verifySigV4(r, body, b.token); reason != "" {
		s3Error(w, http.StatusForbidden, "SignatureDoesNotMatch", reason)
		return
	}
	if b.override != nil && b.override(w, r) {
		return
	}
	path, _, _ := strings.Cut(r.RequestURI, "?")
	key, ok := strings.CutPrefix(path, "/"+b.name+"/")
	if strings.HasPrefix(r.Host, b.name+".") { // virtual-hosted style
		key, ok = strings.CutPrefix(path, "/")
	}
	if !ok {
		s3Error(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		b.objects[key] = body
	case http.MethodGet:
		data, ok := b.objects[key]
		if !ok {
			s3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
			return
		}
		_, _ = w.Write(data)
	default:
		s3Error(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method)
	}
}

// verifySigV4 checks r's signature as a service does, from the request as
// received: "" when it holds, else why not.
func verifySigV4(r *http.Request, body []byte, token string) string {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "no AWS4-HMAC-SHA256 authorization"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	cred := strings.Split(fields["Credential"], "/")
	if len(cred) != 5 || cred[0] != testAccessKey || cred[3] != "s3" || cred[4] != "aws4_request" {
		return "bad credential " + fields["Credential"]
	}
	date := r.Header.Get("X-Amz-Date")
	if !strings.HasPrefix(date, cred[1]) {
		return "date and scope differ"
	}
	sum := sha256.Sum256(body)
	if r.Header.Get("X-Amz-Content-Sha256") != hex.EncodeToString(sum[:]) {
		return "x-amz-content-sha256 is not the body's"
	}
	if token != "" && r.Header.Get("X-Amz-Security-Token") != token {
		return "no session token"
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	need := []string{"host", "x-amz-content-sha256", "x-amz-date"}
	if token != "" {
		need = append(need, "x-amz-security-token")
	}
	for _, n := range need {
		if !containsString(signed, n) {
			return n + " is not signed"
		}
	}
	var canon strings.Builder
	path, query, _ := strings.Cut(r.RequestURI, "?")
	canon.WriteString(r.Method + "\n" + path + "\n")
	params := strings.Split(query, "&")
	sort.Strings(params)
	if query != "" {
		canon.WriteString(strings.Join(params, "&"))
	}
	canon.WriteString("\n")
	for _, n := range signed {
		v := r.Header.Get(n)
		if n == "host" {
			v = r.Host
		}
		canon.WriteString(n + ":" + strings.TrimSpace(v) + "\n")
	}
	canon.WriteString("\n" + fields["SignedHeaders"] + "\n" + r.Header.Get("X-Amz-Content-Sha256"))
	ch := sha256.Sum256([]byte(canon.String()))
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256", date, strings.Join(cred[1:], "/"), hex.EncodeToString(ch[:])}, "\n")
	mac := func(k []byte, s string) []byte { h := hmac.New(sha256.New, k); h.Write([]byte(s)); return h.Sum(nil) }
	k := mac([]byte("AWS4"+testSecret), cred[1])
	for _, s := range cred[2:] {
		k = mac(k, s)
	}
	if want := hex.EncodeToString(mac(k, toSign)); !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return "The request signature we calculated does not match the signature you provided."
	}
	return ""
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func newS3(t *testing.T, srv *httptest.Server, edit func(*S3Config)) *S3 {
	t.Helper()
	cfg := S3Config{Endpoint: srv.URL, Bucket: "payloads", AccessKeyID: testAccessKey, SecretAccessKey: testSecret, Client: srv.Client()}
	if edit != nil {
		edit(&cfg)
	}
	s, err := NewS3(cfg)
	require.NoError(t, err)
	return s
}

func keyOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// A payload put is got back; putting it again keeps one object; a key
// the bucket lacks is ErrNotFound; keys that are not SHA-256 in hex are
// refused before anything is sent. Every request passed the bucket's
// signature check.
func TestS3RoundTrip(t *testing.T) {
	b, srv := newBucket(t)
	b.token = testToken
	s := newS3(t, srv, func(c *S3Config) { c.Prefix = "agentfsm/v1/"; c.SessionToken = testToken })
	ctx := context.Background()
	data := []byte("a payload for the bucket")
	key := keyOf(data)
	require.NoError(t, s.Put(ctx, key, data))
	require.NoError(t, s.Put(ctx, key, data))
	got, err := s.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Equal(t, map[string][]byte{"agentfsm/v1/" + key: data}, b.objects, "one object, under the prefix")

	_, err = s.Get(ctx, strings.Repeat("ab", 32))
	require.ErrorIs(t, err, ErrNotFound)

	before := b.requests
	for _, bad := range []string{"../x", "", strings.ToUpper(key), key + "/..", "?" + key[1:]} {
		assert.ErrorContains(t, s.Put(ctx, bad, data), "is not a SHA-256 in hex")
		_, err := s.Get(ctx, bad)
		assert.ErrorContains(t, err, "is not a SHA-256 in hex")
	}
	assert.Equal(t, before, b.requests, "no request for a bad key")

	// A prefix with characters a URL escapes is signed as it is sent.
	odd := newS3(t, srv, func(c *S3Config) { c.Prefix = "a b/ü+!$&'()*,;=:@%?#~/"; c.SessionToken = testToken })
	require.NoError(t, odd.Put(ctx, key, data))
	got, err = odd.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Contains(t, b.objects, "a%20b/%C3%BC%2B%21%24%26%27%28%29%2A%2C%3B%3D%3A%40%25%3F%23~/"+key)
}

// The bucket's refusals come back as errors naming the status and S3's
// code and message, never the secret or the signature; a 404 of a bucket
// that does not exist is not taken for a missing payload.
func TestS3Errors(t *testing.T) {
	b, srv := newBucket(t)
	ctx := context.Background()
	key := keyOf([]byte("x"))

	wrong := newS3(t, srv, func(c *S3Config) { c.SecretAccessKey = "not-the-secret" })
	err := wrong.Put(ctx, key, []byte("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "403 Forbidden")
	assert.Contains(t, err.Error(), "SignatureDoesNotMatch")
	assert.Contains(t, err.Error(), "does not match the signature you provided")
	assert.Contains(t, err.Error(), "payloads/"+key)
	assert.NotContains(t, err.Error(), "not-the-secret")
	assert.NotContains(t, err.Error(), "Signature=")
	_, err = wrong.Get(ctx, key)
	assert.ErrorContains(t, err, "SignatureDoesNotMatch")
	assert.False(t, errors.Is(err, ErrNotFound))

	other := newS3(t, srv, func(c *S3Config) { c.Bucket = "another" })
	_, err = other.Get(ctx, key)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNotFound), "a missing bucket is not a missing payload: %v", err)
	assert.Contains(t, err.Error(), "NoSuchBucket")

	s := newS3(t, srv, nil)
	// A proxy's 404 page (the endpoint's path is wrong) is not a
	// missing payload either; a bare 404 is.
	b.override = func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<html><body>404 page not found</body></html>")
		return true
	}
	_, err = s.Get(ctx, key)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNotFound), "%v", err)
	assert.Contains(t, err.Error(), "404 Not Found")
	b.override = func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusNotFound)
		return true
	}
	_, err = s.Get(ctx, key)
	assert.ErrorIs(t, err, ErrNotFound)

	b.override = func(w http.ResponseWriter, r *http.Request) bool {
		s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
		return true
	}
	err = s.Put(ctx, key, []byte("x"))
	assert.ErrorContains(t, err, "500 Internal Server Error: InternalError")
	_, err = s.Get(ctx, key)
	assert.ErrorContains(t, err, "500 Internal Server Error: InternalError")

	// A proxy's error page, not XML, and endless: the status is enough,
	// and the body is read no further than the bound.
	b.override = func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusBadGateway)
		chunk := []byte(strings.Repeat("<html>bad gateway</html>", 1000))
		for range 100 {
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
		return true
	}
	_, err = s.Get(ctx, key)
	assert.ErrorContains(t, err, "502 Bad Gateway")
	assert.Less(t, len(err.Error()), 400)
}

// An object over MaxSize is refused by Get, whether its length is
// announced or not, and a payload over it by Put before sending it.
func TestS3SizeBound(t *testing.T) {
	b, srv := newBucket(t)
	s := newS3(t, srv, func(c *S3Config) { c.MaxSize = 100 })
	ctx := context.Background()
	big := []byte(strings.Repeat("z", 101))
	err := s.Put(ctx, keyOf(big), big)
	assert.ErrorContains(t, err, "101 bytes, over S3Config.MaxSize (100)")
	assert.Equal(t, 0, b.requests)

	key := keyOf(big)
	b.objects[key] = big
	_, err = s.Get(ctx, key)
	assert.ErrorContains(t, err, "over S3Config.MaxSize")

	b.override = func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Transfer-Encoding", "chunked")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		_, _ = w.Write(big)
		return true
	}
	_, err = s.Get(ctx, key)
	assert.ErrorContains(t, err, "over S3Config.MaxSize")

	ok := []byte(strings.Repeat("y", 100))
	b.override = nil
	require.NoError(t, s.Put(ctx, keyOf(ok), ok))
	got, err := s.Get(ctx, keyOf(ok))
	require.NoError(t, err)
	assert.Equal(t, ok, got)
}

// A request whose context is cancelled while the bucket holds it returns
// an error wrapping the context's.
func TestS3ContextCancelled(t *testing.T) {
	b, srv := newBucket(t)
	arrived := make(chan struct{})
	b.override = func(w http.ResponseWriter, r *http.Request) bool {
		close(arrived)
		<-r.Context().Done()
		return true
	}
	s := newS3(t, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := s.Get(ctx, keyOf([]byte("x")))
	assert.ErrorIs(t, err, context.Canceled)

	_, err = s.Get(ctx, keyOf([]byte("x")))
	assert.ErrorIs(t, err, context.Canceled, "already cancelled")
	assert.ErrorIs(t, s.Put(ctx, keyOf([]byte("x")), []byte("x")), context.Canceled)
}

// The codec over S3: large payloads go to the bucket and come back
// through the data converter; an object changed in the bucket is caught
// by the codec's hash check.
func TestCodecOverS3(t *testing.T) {
	b, srv := newBucket(t)
	for _, virtual := range []bool{false, true} {
		s := newS3(t, srv, func(c *S3Config) { c.Prefix = "p/" })
		if virtual {
			// The virtual-hosted name is dialled at the test server's
			// address: the bucket is named by the Host only.
			addr := srv.Listener.Addr().String()
			tr := srv.Client().Transport.(*http.Transport).Clone()
			tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			t.Cleanup(tr.CloseIdleConnections)
			s = newS3(t, srv, func(c *S3Config) { c.Prefix = "p/"; c.VirtualHosted = true; c.Client = &http.Client{Transport: tr} })
			assert.Equal(t, "payloads."+addr, s.host)
			assert.Equal(t, "", s.basePath)
		}
		dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), &Codec{Store: s})
		big := strings.Repeat("context ", 1000)
		p, err := dc.ToPayloads(big, "small")
		require.NoError(t, err)
		assert.Equal(t, Encoding, string(p.Payloads[0].Metadata["encoding"]))
		var gotBig, gotSmall string
		require.NoError(t, dc.FromPayloads(p, &gotBig, &gotSmall))
		assert.Equal(t, big, gotBig)
		assert.Equal(t, "small", gotSmall)
		assert.Len(t, b.objects, 1)

		key := string(p.Payloads[0].Data)
		b.objects["p/"+key] = []byte("tampered")
		_, err = (&Codec{Store: s}).Decode([]*commonpb.Payload{p.Payloads[0]})
		assert.ErrorContains(t, err, "does not match its hash")
		delete(b.objects, "p/"+key)
		_, err = (&Codec{Store: s}).Decode([]*commonpb.Payload{p.Payloads[0]})
		assert.ErrorIs(t, err, ErrNotFound)
	}
}

// NewS3 names what in the configuration is wrong.
func TestNewS3Config(t *testing.T) {
	good := S3Config{Endpoint: "http://minio:9000", Bucket: "payloads", AccessKeyID: "a", SecretAccessKey: "s"}
	for _, c := range []struct {
		edit func(*S3Config)
		want string
	}{
		{func(c *S3Config) { c.Endpoint = "" }, "Endpoint is empty"},
		{func(c *S3Config) { c.Endpoint = "ftp://x" }, "not an http or https URL"},
		{func(c *S3Config) { c.Endpoint = "minio:9000" }, "not an http or https URL"},
		{func(c *S3Config) { c.Endpoint = "http://user:pw@minio" }, "without user"},
		{func(c *S3Config) { c.Endpoint = "http://minio/?x=1" }, "without user, query"},
		{func(c *S3Config) { c.Bucket = "" }, "Bucket is empty"},
		{func(c *S3Config) { c.Bucket = "../etc" }, "is not a bucket name"},
		{func(c *S3Config) { c.Bucket = "a/b/c" }, "is not a bucket name"},
		{func(c *S3Config) { c.SecretAccessKey = "" }, "AccessKeyID and SecretAccessKey are required"},
		{func(c *S3Config) { c.AccessKeyID = "" }, "AccessKeyID and SecretAccessKey are required"},
		{func(c *S3Config) { c.Prefix = "/abs/" }, "starts with a slash"},
		{func(c *S3Config) { c.Prefix = "a//b/" }, "empty"},
		{func(c *S3Config) { c.Prefix = "../other-bucket/" }, `".."`},
		{func(c *S3Config) { c.Prefix = "a\nb/" }, "control character"},
		{func(c *S3Config) { c.Region = "us east" }, "is not a region"},
		{func(c *S3Config) { c.MaxSize = -1 }, "is negative"},
		{func(c *S3Config) { c.Endpoint = "https://s3.example.com"; c.Bucket = "a.b.c"; c.VirtualHosted = true }, "holds a dot"},
	} {
		cfg := good
		c.edit(&cfg)
		s, err := NewS3(cfg)
		assert.Nil(t, s)
		assert.ErrorContains(t, err, c.want)
		if err != nil {
			assert.NotContains(t, err.Error(), "pw@")
		}
	}
	s, err := NewS3(good)
	require.NoError(t, err)
	assert.Equal(t, "us-east-1", s.cfg.Region)
	assert.Equal(t, "/payloads", s.basePath)
}

// countingBody is a response body of n bytes that counts what is read.
type countingBody struct{ n, read int64 }

func (c *countingBody) Read(p []byte) (int, error) {
	if c.read >= c.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), c.n-c.read)
	for i := range p[:k] {
		p[i] = '<'
	}
	c.read += k
	return int(k), nil
}

func (c *countingBody) Close() error { return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A body of unannounced length, far over the bound, is read no further
// than the bound, whether it is an object or an error: a broken or
// hostile endpoint cannot make a worker hold what it sends.
func TestS3ReadsNoFurtherThanTheBound(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusForbidden} {
		body := &countingBody{n: 1 << 30}
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Status: http.StatusText(status), ContentLength: -1, Body: body, Header: http.Header{}, Request: r}, nil
		})}
		s, err := NewS3(S3Config{Endpoint: "http://s3.invalid", Bucket: "payloads", AccessKeyID: "a", SecretAccessKey: "s", Client: client, MaxSize: 1000})
		require.NoError(t, err)
		_, err = s.Get(context.Background(), keyOf([]byte("x")))
		require.Error(t, err)
		if status == http.StatusOK {
			assert.ErrorContains(t, err, "over S3Config.MaxSize")
			assert.LessOrEqual(t, body.read, int64(1001))
		} else {
			assert.LessOrEqual(t, body.read, int64(errorBodyLimit))
		}
	}
}

// Puts and Gets from many goroutines at once each get their own answer.
func TestS3Concurrent(t *testing.T) {
	_, srv := newBucket(t)
	s := newS3(t, srv, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			data := []byte(fmt.Sprintf("payload %d", i%4))
			if err := s.Put(context.Background(), keyOf(data), data); err != nil {
				errs <- err
				return
			}
			got, err := s.Get(context.Background(), keyOf(data))
			if err == nil && string(got) != string(data) {
				err = fmt.Errorf("got %q for %q", got, data)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
