/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The id maps a rootful containers/storage store records for what was
 * made for a user namespace, moved with the store, as pure functions on
 * buffers.  Such a layer (a mapped copy of an image's top layer, or a
 * container's layer) holds host ids, and its record says which map
 * made them:
 *   - layers.json and containers.json: "uidmap"/"gidmap", arrays of
 *     {"container_id","host_id","size"};
 *   - libpod's database, each container's "config": its
 *     "idMappingsOptions" "UIDMap"/"GIDMap" (the same form) and its
 *     OCI spec's "linux" "uidMappings"/"gidMappings"
 *     ({"containerID","hostID","size"}).
 * A migration sends every host id through f[2] (the composed map, the
 * identity outside the old range), so the records change as the files
 * do; a record without a map (container ids) is left as it is.
 */
#ifndef SHIFTIMG_STOREMAP_H
#define SHIFTIMG_STOREMAP_H

#include <stdbool.h>
#include <stddef.h>

#include "bolt.h"
#include "rules.h"

#define SI_STORE_ID_MAX	128

/* The records of a layers.json or containers.json. */
struct si_store_ids {
	struct si_store_rec {
		char id[SI_STORE_ID_MAX];
		char layer[SI_STORE_ID_MAX];	/* a container's layer, or "" */
		bool mapped;		/* it has a uidmap or a gidmap */
	} *rec;
	size_t nr;
};

/*
 * Moves the maps of every record of layers.json or containers.json (b,
 * n) through f, and lists the records.  *out is the new document
 * (malloc'ed), or NULL when nothing changes.  Returns 0, or -1 with the
 * reason in why (bad JSON, a map f does not cover, a map that would
 * send two container ids to one host id).
 */
int si_storemap_records(const char *b, size_t n, const struct si_idmap f[2],
			char **out, size_t *outlen, struct si_store_ids *ids,
			char *why, size_t size);
void si_store_ids_free(struct si_store_ids *ids);

/*
 * The same for the config of every container in libpod's database
 * (ctr/<id>/config), changed in db; *changed counts the configs.
 */
int si_storemap_libpod(struct si_bolt *db, const struct si_idmap f[2],
		       unsigned int *changed, char *why, size_t size);

/* libpod's run root (runtime-config/run-root) into out, or "". */
void si_libpod_runroot(struct si_bolt *db, char *out, size_t size);

#endif /* SHIFTIMG_STOREMAP_H */
