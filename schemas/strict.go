package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// This file checks a decoded JSON tree against the Go type it is meant for,
// before encoding/json sees it, so that every unknown field and every value of
// the wrong JSON type is reported with its full path. encoding/json alone says
// `unknown field "x"` without saying where, matches names case-insensitively,
// and stops at the first problem.

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

// typeInfo is what checkTree needs to know of a Go type, worked out once per
// type: checkTree runs for every value of every intent.
type typeInfo struct {
	// leaf: the type has its own UnmarshalJSON, which checkLeaf runs.
	leaf bool
	// fields maps the JSON names of a struct's fields (jsonFields) to their
	// types.
	fields map[string]reflect.Type
}

var typeInfos sync.Map // reflect.Type -> *typeInfo

// infoOf returns the typeInfo of t, which is neither a pointer nor an
// interface.
func infoOf(t reflect.Type) *typeInfo {
	if ti, ok := typeInfos.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{leaf: reflect.PointerTo(t).Implements(unmarshalerType)}
	if t.Kind() == reflect.Struct && !ti.leaf {
		ti.fields = map[string]reflect.Type{}
		for _, f := range jsonFields(t) {
			ti.fields[f.name] = f.typ
		}
	}
	typeInfos.Store(t, ti)
	return ti
}

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
}

// jsonFields lists the fields of struct t under their JSON names, in order,
// with the fields of embedded structs without a JSON name promoted as
// encoding/json does. The JSON Schemas are generated from the same list
// (schemagen_test.go), so that they and checkTree agree on the names.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	seen := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for f := range t.Fields() {
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, jsonField{name, strings.Contains(opts, "omitempty"), f.Type})
			}
		}
	}
	walk(t)
	return out
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// checkTree reports under path each object member of v that t has no field
// for (ErrUnsupported: the node cannot honour a field it does not know) and
// each value whose JSON type t cannot hold (ErrInvalid). v comes from a
// json.Decoder with UseNumber. null is accepted where Go can hold "absent"
// (pointers, slices, maps, interfaces, types with their own UnmarshalJSON) and
// refused elsewhere.
func checkTree(e *errs, path string, v any, t reflect.Type) {
	if len(e.list) >= 4*maxReported || t == rawMessageType {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v != nil {
			checkTree(e, path, v, t.Elem())
		}
		return
	case reflect.Interface:
		return
	}
	ti := infoOf(t)
	if ti.leaf {
		checkLeaf(e, path, v, t)
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Map:
		if v == nil {
			return
		}
	default:
		if v == nil {
			e.invalid(path, "must not be null")
			return
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			e.invalid(path, "must be an object")
			return
		}
		for _, k := range sortedKeys(obj) {
			ft, known := ti.fields[k]
			if !known {
				e.unsupported(joinField(path, k), "unknown field")
				continue
			}
			checkTree(e, joinField(path, k), obj[k], ft)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			e.invalid(path, "must be an object")
			return
		}
		for _, k := range sortedKeys(obj) {
			checkTree(e, path+"["+k+"]", obj[k], t.Elem())
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			if _, ok := v.(string); !ok {
				e.invalid(path, "must be a base64 string")
			}
			return
		}
		arr, ok := v.([]any)
		if !ok {
			e.invalid(path, "must be an array")
			return
		}
		for i, x := range arr {
			checkTree(e, path+"["+strconv.Itoa(i)+"]", x, t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			e.invalid(path, "must be a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			e.invalid(path, "must be a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			e.invalid(path, "must be an integer")
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			e.invalid(path, intReason(n, t))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			e.invalid(path, "must be an integer")
			return
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			e.invalid(path, intReason(n, t))
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			e.invalid(path, "must be a number")
			return
		}
		if _, err := strconv.ParseFloat(n.String(), t.Bits()); err != nil {
			e.invalid(path, "must be a number in range")
		}
	default:
		e.invalid(path, "cannot be decoded")
	}
}

func intReason(n json.Number, t reflect.Type) string {
	if strings.ContainsAny(n.String(), ".eE") {
		return "must be an integer"
	}
	return "must be an integer that fits in " + t.String()
}

// checkLeaf runs the type's own UnmarshalJSON on v, so that a bad quantity,
// time or int-or-string is reported at its path.
func checkLeaf(e *errs, path string, v any, t reflect.Type) {
	raw, err := json.Marshal(v)
	if err != nil {
		e.invalid(path, "cannot be encoded again")
		return
	}
	u := reflect.New(t).Interface().(json.Unmarshaler)
	if err := u.UnmarshalJSON(raw); err != nil {
		e.invalid(path, leafReason(err))
	}
}

func leafReason(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// sortedKeys is sortedNames for a JSON object. It stays apart because checkTree
// calls it for every object: this one is inlined and its slice, when small,
// kept off the heap; the generic one's is not.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseTree decodes body as exactly one JSON value with numbers kept as text.
func parseTree(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	for _, c := range body[dec.InputOffset():] {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return nil, errTrailingData
		}
	}
	return v, nil
}

var errTrailingData = errors.New("data after the JSON value")
