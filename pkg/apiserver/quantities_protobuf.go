package apiserver

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// protobufQuantityBounds checks the quantities of a protobuf MyDatabase
// for their bounds before the protobuf decoder parses them (it calls
// resource.ParseQuantity on each Quantity message's string). It relies on
// the wire form of k8s.io/apimachinery/pkg/runtime/serializer/protobuf
// (protoEncodingPrefix, then a runtime.Unknown); it is on the review list of
// pkg/storagewrap/upstream.go.
type protobufQuantityBounds struct {
	runtime.Serializer
}

func (s protobufQuantityBounds) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if errs := protobufQuantities(data); len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	return s.Serializer.Decode(data, defaults, into)
}

// protobufMagic starts every Kubernetes protobuf body, which is a
// runtime.Unknown: typeMeta (1: apiVersion 1, kind 2) and raw (2).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// Field numbers of generated.proto on the path to the quantities.
const (
	unknownTypeMeta      = 1
	unknownRaw           = 2
	typeMetaKind         = 2
	myDatabaseSpec       = 2
	specStorageSize      = 4
	specResources        = 6
	resourcesLimits      = 1
	resourcesRequests    = 2
	mapEntryKey          = 1
	mapEntryValue        = 2
	quantityStringNumber = 1
)

// protobufQuantities returns the quantities of a protobuf MyDatabase body
// beyond the bounds, by field path. A body that is not one, or does not
// parse, returns nothing: the decoder says what is wrong with it. Every
// occurrence of a field is checked, since the decoder parses each.
func protobufQuantities(data []byte) field.ErrorList {
	raw, ok := bytes.CutPrefix(data, protobufMagic)
	if !ok {
		return nil
	}
	var kind string
	var objects [][]byte
	eachField(raw, func(num protowire.Number, b []byte) {
		switch num {
		case unknownTypeMeta:
			eachField(b, func(num protowire.Number, b []byte) {
				if num == typeMetaKind {
					kind = string(b)
				}
			})
		case unknownRaw:
			objects = append(objects, b)
		}
	})
	if kind != "MyDatabase" {
		return nil
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	check := func(path *field.Path, quantity []byte) {
		eachField(quantity, func(num protowire.Number, b []byte) {
			if num == quantityStringNumber {
				if err := boundProblem(path, string(b)); err != nil {
					errs = append(errs, err)
				}
			}
		})
	}
	for _, obj := range objects {
		eachField(obj, func(num protowire.Number, b []byte) {
			if num != myDatabaseSpec {
				return
			}
			eachField(b, func(num protowire.Number, b []byte) {
				switch num {
				case specStorageSize:
					check(spec.Child("storageSize"), b)
				case specResources:
					eachField(b, func(num protowire.Number, entry []byte) {
						list := map[protowire.Number]string{resourcesLimits: "limits", resourcesRequests: "requests"}[num]
						if list == "" {
							return
						}
						var key string
						var values [][]byte
						eachField(entry, func(num protowire.Number, b []byte) {
							switch num {
							case mapEntryKey:
								key = string(b)
							case mapEntryValue:
								values = append(values, b)
							}
						})
						for _, v := range values {
							check(spec.Child("resources", list).Key(key), v)
						}
					})
				}
			})
		})
	}
	return errs
}

// eachField calls f with every length-delimited field of the protobuf
// message b, and skips the others; it stops at the first malformed byte.
func eachField(b []byte, f func(protowire.Number, []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return
			}
			f(num, v)
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return
		}
		b = b[m:]
	}
}
