// The xDS mapping's entry: one file per resource type, as Envoy's API is (listener, route,
// cluster, endpoint), and what they share (read.ts). The client, the composition and the
// bootstrap import from here; the helpers the mappers share among themselves stay inside.
export { TYPE, arr, obj, type AnyDecoder, type Issue, type Mapped, type Msg, type TypeUrl } from "./read.js";
export { mapListener, type XdsListener } from "./listener.js";
export { mapRouteConfiguration, type XdsRoute, type XdsRouteTable, type XdsVirtualHost } from "./route.js";
export { mapCluster, type TlsSource, type XdsCluster, type XdsTls } from "./cluster.js";
export { endpointsChange, mapClusterLoadAssignment, mapClusterLoadAssignmentBytes, type ClaMemo, type LbEndpointMapped, type XdsEndpoints } from "./endpoint.js";
