package apiserver

import (
	"strings"

	"github.com/emicklei/go-restful/v3"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
)

// OperationIDs names OpenAPI operations as k8s.io/apiserver does, but for
// the mydatabases/backup action: its generated ID (verb, parent kind,
// subresource) equals the create of mydatabasebackups, and OpenAPI needs
// unique IDs, so it gets an "Action" suffix.
func OperationIDs(r *restful.Route) (string, []string, error) {
	id, tags, err := apiopenapi.GetOperationIDAndTags(r)
	if err == nil && strings.HasSuffix(r.Path, "/mydatabases/{name}/backup") {
		id += "Action"
	}
	return id, tags, err
}
