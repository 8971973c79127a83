package claimcheck

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultS3MaxSize is the largest payload S3 puts or gets when
// S3Config.MaxSize is 0.
const DefaultS3MaxSize = 256 << 20

// errorBodyLimit bounds how much of an error response S3 reads.
const errorBodyLimit = 16 << 10

// S3Config configures an S3 store.
type S3Config struct {
	// Endpoint is the service's URL, http or https, without the bucket:
	// "https://s3.eu-west-1.amazonaws.com", "http://minio:9000"; a path
	// in it is kept before the bucket's. Required.
	Endpoint string
	// Region is the region the requests are signed for; "" means
	// us-east-1 (what MinIO, Ceph and Garage accept by default; R2 takes
	// "auto").
	Region string
	// Bucket is the bucket's name. Required.
	Bucket string
	// AccessKeyID and SecretAccessKey sign each request. Required.
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken, when not empty, is sent (and signed) as
	// x-amz-security-token: temporary credentials need it.
	SessionToken string
	// Prefix is put before each key in the bucket, as in "agentfsm/";
	// it is used as given (add the slash), and may not hold an empty,
	// "." or ".." path segment.
	Prefix string
	// VirtualHosted addresses the bucket as a host name
	// (https://bucket.endpoint/key) instead of a path
	// (https://endpoint/bucket/key), which all S3-compatible services
	// take and the default is.
	VirtualHosted bool
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// MaxSize is the largest payload in bytes that Put stores and Get
	// reads; 0 means DefaultS3MaxSize.
	MaxSize int64
}

// S3 is a Store in a bucket of Amazon S3 or of a service that speaks its
// API (MinIO, Ceph, Cloudflare R2, Garage): one object per key, under
// Prefix, written by PUT and read by GET, each request signed with AWS
// Signature Version 4 and carrying the SHA-256 of its content
// (x-amz-content-sha256), so the service refuses a body changed on the
// way. It serves every worker that reaches the bucket. A PUT stores the
// whole object or nothing, and writing a key again writes the same
// content. Get checks nothing of the content: Codec checks it against its
// key. An S3 is safe for concurrent use.
type S3 struct {
	cfg      S3Config
	scheme   string
	host     string // the Host the requests name
	basePath string // the path before the key: the endpoint's, and the bucket's in path style
	client   *http.Client
	now      func() time.Time
}

// NewS3 returns the store cfg describes, or an error naming what in cfg
// is missing or wrong. It sends nothing.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("claimcheck: S3Config.Endpoint is empty")
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: S3Config.Endpoint: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("claimcheck: S3Config.Endpoint %q is not an http or https URL", cfg.Endpoint)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("claimcheck: S3Config.Endpoint %q must be scheme://host[:port][/path], without user, query or fragment", u.Redacted())
	}
	if cfg.Bucket == "" {
		return nil, errors.New("claimcheck: S3Config.Bucket is empty")
	}
	if !validBucket(cfg.Bucket) {
		return nil, fmt.Errorf("claimcheck: S3Config.Bucket %.80q is not a bucket name (lowercase letters, digits, '.', '-', '_', 3 to 63 characters)", cfg.Bucket)
	}
	if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
		return nil, errors.New("claimcheck: S3Config.AccessKeyID and SecretAccessKey are required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if strings.ContainsAny(cfg.Region, "/ \n\r\t") {
		return nil, fmt.Errorf("claimcheck: S3Config.Region %.80q is not a region", cfg.Region)
	}
	if cfg.Prefix != "" {
		if strings.HasPrefix(cfg.Prefix, "/") {
			return nil, fmt.Errorf("claimcheck: S3Config.Prefix %.80q starts with a slash", cfg.Prefix)
		}
		segs := strings.Split(cfg.Prefix, "/")
		for i, s := range segs {
			if (s == "" && i < len(segs)-1) || s == "." || s == ".." {
				return nil, fmt.Errorf("claimcheck: S3Config.Prefix %.80q holds an empty, \".\" or \"..\" segment", cfg.Prefix)
			}
		}
		if strings.ContainsFunc(cfg.Prefix, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, fmt.Errorf("claimcheck: S3Config.Prefix %.80q holds a control character", cfg.Prefix)
		}
	}
	if cfg.MaxSize < 0 {
		return nil, fmt.Errorf("claimcheck: S3Config.MaxSize %d is negative", cfg.MaxSize)
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultS3MaxSize
	}
	s := &S3{cfg: cfg, scheme: u.Scheme, host: u.Host, client: cfg.Client, now: time.Now}
	if s.client == nil {
		s.client = http.DefaultClient
	}
	s.basePath = strings.TrimSuffix(u.Path, "/")
	if cfg.VirtualHosted {
		if strings.Contains(cfg.Bucket, ".") && u.Scheme == "https" {
			return nil, fmt.Errorf("claimcheck: S3Config.Bucket %q holds a dot: a virtual-hosted name would not match the service's certificate; use path style", cfg.Bucket)
		}
		s.host = cfg.Bucket + "." + u.Host
	} else {
		s.basePath += "/" + cfg.Bucket
	}
	return s, nil
}

// validBucket reports whether name can be a bucket's (S3's rules, relaxed
// to the underscore some services allow): nothing that changes a path.
func validBucket(name string) bool {
	if len(name) < 3 || len(name) > 63 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' && c != '_' {
			return false
		}
	}
	return !strings.Contains(name, "..")
}

// Put stores data under key with a PUT of the object.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if !validKey(key) {
		return fmt.Errorf("claimcheck: key %.80q is not a SHA-256 in hex", key)
	}
	if int64(len(data)) > s.cfg.MaxSize {
		return fmt.Errorf("claimcheck: payload %s is %d bytes, over S3Config.MaxSize (%d)", key, len(data), s.cfg.MaxSize)
	}
	resp, err := s.do(ctx, http.MethodPut, key, data)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return s.statusError(http.MethodPut, key, resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyLimit))
	return nil
}

// Get reads key's object; an error wrapping ErrNotFound when the bucket
// answers 404 NoSuchKey (or 404 with an empty body), an error naming the status and S3's code and
// message for any other answer than 200.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if !validKey(key) {
		return nil, fmt.Errorf("claimcheck: key %.80q is not a SHA-256 in hex", key)
	}
	resp, err := s.do(ctx, http.MethodGet, key, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, s.statusError(http.MethodGet, key, resp)
	}
	if resp.ContentLength > s.cfg.MaxSize {
		return nil, fmt.Errorf("claimcheck: S3 GET %s: the object is %d bytes, over S3Config.MaxSize (%d)", s.name(key), resp.ContentLength, s.cfg.MaxSize)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("claimcheck: S3 GET %s: reading the object: %w", s.name(key), err)
	}
	if int64(len(data)) > s.cfg.MaxSize {
		return nil, fmt.Errorf("claimcheck: S3 GET %s: the object is over S3Config.MaxSize (%d bytes)", s.name(key), s.cfg.MaxSize)
	}
	return data, nil
}

// name is key's object as bucket/prefix+key, for errors.
func (s *S3) name(key string) string { return s.cfg.Bucket + "/" + s.cfg.Prefix + key }

// do sends the signed request for key's object.
func (s *S3) do(ctx context.Context, method, key string, body []byte) (*http.Response, error) {
	p := s.basePath + "/" + s.cfg.Prefix + key
	u := &url.URL{Scheme: s.scheme, Host: s.host, Path: p, RawPath: uriEncode(p, false)}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: S3 %s %s: %w", method, s.name(key), err)
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if s.cfg.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", s.cfg.SessionToken)
	}
	signV4(req, payloadHash, s.cfg.AccessKeyID, s.cfg.SecretAccessKey, s.cfg.Region, "s3", s.now())
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: S3 %s %s: %w", method, s.name(key), err)
	}
	return resp, nil
}

// statusError is the error of an answer other than success: ErrNotFound
// for a 404 NoSuchKey (or a 404 with an empty body), otherwise the status
// and the code and message of S3's XML error, read up to
// errorBodyLimit bytes.
func (s *S3) statusError(method, key string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	_ = xml.Unmarshal(body, &e)
	if resp.StatusCode == http.StatusNotFound && (e.Code == "NoSuchKey" || len(bytes.TrimSpace(body)) == 0) {
		return fmt.Errorf("%w: %s (S3 %s %s: 404)", ErrNotFound, key, method, s.name(key))
	}
	msg := fmt.Sprintf("claimcheck: S3 %s %s: %s", method, s.name(key), resp.Status)
	if e.Code != "" {
		msg += fmt.Sprintf(": %.100s", e.Code)
	}
	if e.Message != "" {
		msg += fmt.Sprintf(": %.300q", e.Message)
	}
	return errors.New(msg)
}

// signV4 signs req for service in region at t with AWS Signature Version
// 4, in its Authorization header: it sets X-Amz-Date and signs Host and
// every header req has then. payloadHash is the hex SHA-256 of the body
// (S3 also wants it in X-Amz-Content-Sha256, which the caller sets).
func signV4(req *http.Request, payloadHash, accessKeyID, secret, region, service string, t time.Time) {
	t = t.UTC()
	amzDate := t.Format("20060102T150405Z")
	day := t.Format("20060102")
	req.Header.Set("X-Amz-Date", amzDate)
	creq, signed := canonicalRequest(req, payloadHash)
	scope := day + "/" + region + "/" + service + "/aws4_request"
	h := sha256.Sum256([]byte(creq))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(h[:])
	k := hmacSHA256([]byte("AWS4"+secret), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	k = hmacSHA256(k, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(k, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+accessKeyID+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalRequest returns req's canonical request (SigV4's) and the list
// of the headers it signs: Host and every header of req.
func canonicalRequest(req *http.Request, payloadHash string) (creq, signed string) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	headers := map[string]string{"host": strings.TrimSpace(host)}
	for name, vals := range req.Header {
		n := strings.ToLower(name)
		if n == "authorization" {
			continue
		}
		vs := make([]string, len(vals))
		for i, v := range vals {
			vs[i] = strings.Join(strings.Fields(v), " ")
		}
		headers[n] = strings.Join(vs, ",")
	}
	names := make([]string, 0, len(headers))
	for n := range headers {
		names = append(names, n)
	}
	sort.Strings(names)
	var ch strings.Builder
	for _, n := range names {
		ch.WriteString(n + ":" + headers[n] + "\n")
	}
	signed = strings.Join(names, ";")

	path := req.URL.Path
	if path == "" {
		path = "/"
	}
	var q []string
	for k, vs := range req.URL.Query() {
		for _, v := range vs {
			q = append(q, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	sort.Strings(q)
	creq = req.Method + "\n" + uriEncode(path, false) + "\n" + strings.Join(q, "&") + "\n" +
		ch.String() + "\n" + signed + "\n" + payloadHash
	return creq, signed
}

// uriEncode percent-encodes every byte of s but the unreserved ones
// (A-Z a-z 0-9 - . _ ~) and, unless slash is true, '/'.
func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/' && !slash:
			b.WriteByte(c)
		default:
			b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)|0x100, 16)[1:]))
		}
	}
	return b.String()
}
