export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json";
export const DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json";
export const OCI_EMPTY = "application/vnd.oci.empty.v1+json";

export const INDEX_TYPES = new Set([OCI_INDEX, DOCKER_LIST]);
export const IMAGE_TYPES = new Set([OCI_MANIFEST, DOCKER_MANIFEST]);
