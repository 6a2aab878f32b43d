/* SPDX-License-Identifier: MIT */
/* CPython code objects (see python.h): reading them from the target, their
 * cache per address space, and their pprof functions and locations (line
 * tables: python_lines.c).  Discovery and the spaces are in python.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "util/hashmap.h"
#include "python/python_int.h"

#define MAX_TABLE (256u << 10) /* line table bytes read per code object */
#define MAX_STR   1024

/* ---------------------------------------------------------------------------
 * u64 -> u64 maps: util/hashmap.h, with the lookups this file makes.
 */
static bool map_get(const struct gs_hmap *m, uint64_t key, uint64_t *val)
{
	const uint64_t *v = gs_hmap_get(m, key);

	if (v)
		*val = *v;
	return v != NULL;
}

void gs_py_code_free(struct py_code *c)
{
	if (!c)
		return; /* a remembered read failure */
	free(c->qualname);
	free(c->filename);
	free(c->table);
	free(c);
}

/* ---------------------------------------------------------------------------
 * Code objects.
 */
static char *read_str(uint32_t pid, const struct py_layout *l, uint64_t obj)
{
	uint8_t hdr[72];
	uint64_t length;
	uint32_t state;

	/* discovery keeps both offsets below 64 */
	if (!obj || l->str_length > sizeof(hdr) - 8 || l->str_state > sizeof(hdr) - 4 ||
	    rd(pid, obj, hdr, sizeof(hdr)))
		return NULL;
	memcpy(&length, hdr + l->str_length, 8);
	memcpy(&state, hdr + l->str_state, 4);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;

	if (!compact || (kind != 1 && kind != 2 && kind != 4) || length > MAX_STR)
		return NULL;
	uint64_t data = obj + (ascii ? l->ascii_size : l->compact_size);
	uint8_t *raw = malloc(length * kind + 1);
	char *out = malloc(length * 4 + 1);
	size_t o = 0;

	if (!raw || !out || rd(pid, data, raw, length * kind)) {
		free(raw);
		free(out);
		return NULL;
	}
	for (uint64_t i = 0; i < length; i++) {
		uint32_t c = kind == 1   ? raw[i]
			     : kind == 2 ? ((uint16_t *)raw)[i]
					 : ((uint32_t *)raw)[i];

		if (c < 0x80) {
			out[o++] = (char)c;
		} else if (c < 0x800) {
			out[o++] = (char)(0xc0 | c >> 6);
			out[o++] = (char)(0x80 | (c & 63));
		} else if (c < 0x10000) {
			out[o++] = (char)(0xe0 | c >> 12);
			out[o++] = (char)(0x80 | ((c >> 6) & 63));
			out[o++] = (char)(0x80 | (c & 63));
		} else {
			out[o++] = (char)(0xf0 | c >> 18);
			out[o++] = (char)(0x80 | ((c >> 12) & 63));
			out[o++] = (char)(0x80 | ((c >> 6) & 63));
			out[o++] = (char)(0x80 | (c & 63));
		}
	}
	out[o] = 0;
	free(raw);
	return out;
}

static int read_bytes(uint32_t pid, const struct py_layout *l, uint64_t obj, uint8_t **out,
		      uint32_t *len)
{
	int64_t size;

	if (!obj || rd(pid, obj + l->bytes_size, &size, 8) || size < 0 || size > MAX_TABLE)
		return -EFAULT;
	*out = malloc(size ? size : 1);
	if (!*out)
		return -ENOMEM;
	if (size && rd(pid, obj + l->bytes_sval, *out, size)) {
		free(*out);
		*out = NULL;
		return -EFAULT;
	}
	*len = (uint32_t)size;
	return 0;
}

/* Read the code object at `code`.  The checksum the BPF walker computed at
 * sample time must match.  A module body's code object is freed as soon as
 * the import finishes, often before the sample is read (a loaded machine);
 * free() then overwrites its first 16 bytes (the allocator's list links,
 * over ob_refcnt and ob_type) but not the fields read here until the
 * memory is reused.  So a wrong ob_type with a matching checksum and fields
 * that still decode is taken as that freed object (*freed = true); memory
 * reused by another code object has the right type and, almost always, a
 * different checksum. */
static struct py_code *read_code(uint32_t pid, const struct py_layout *l, uint64_t code,
				 uint16_t check, bool *freed)
{
	uint8_t buf[256];
	uint64_t type, name, file, table;
	int32_t first, argc;

	if (rd(pid, code, buf, sizeof(buf)))
		return NULL;
	memcpy(&type, buf + 8, 8);
	memcpy(&first, buf + l->co_firstlineno, 4);
	memcpy(&argc, buf + l->co_argcount, 4);
	if (gs_py_checksum(first, argc) != check)
		return NULL;
	*freed = type != l->code_type;
	memcpy(&name, buf + (l->co_qualname ? l->co_qualname : l->co_name), 8);
	memcpy(&file, buf + l->co_filename, 8);
	memcpy(&table, buf + l->co_table, 8);
	struct py_code *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->firstlineno = first;
	c->version_hex = l->version_hex;
	c->qualname = read_str(pid, l, name);
	c->filename = read_str(pid, l, file);
	if (!c->qualname || !c->filename || read_bytes(pid, l, table, &c->table, &c->table_len)) {
		gs_py_code_free(c);
		return NULL;
	}
	return c;
}

static uint64_t code_key(const struct gs_py_frame *f)
{
	return (uint64_t)f->check << 48 | (f->code & 0xffffffffffffull);
}

/* Cached code object of frame f of tgid, reading it (from tgid, else from
 * another process of the same address space) when first seen. */
static struct py_code *code_get(struct gs_py *py, uint32_t tgid, const struct gs_py_frame *f,
				bool *is_new)
{
	struct py_space *sp = space_of(py, tgid);
	uint64_t v, key = code_key(f);
	struct py_code *c = NULL;

	*is_new = false;
	if (!f->code || (f->flags & GS_PYF_BAD_CODE))
		return NULL;
	if (sp && map_get(&sp->codes, key, &v) && v)
		return (struct py_code *)(uintptr_t)v;
	struct py_space *old = retired_of(py, tgid); /* from before an exec */

	if (old && map_get(&old->codes, key, &v) && v)
		return (struct py_code *)(uintptr_t)v;
	if (!sp || map_get(&sp->codes, key, &v))
		return NULL; /* unknown process, or a known read failure */
	bool freed = false;

	c = read_code(tgid, &sp->lay, f->code, f->check, &freed);
	for (uint32_t i = sp->n_pids; !c && i-- > 0;)
		if (sp->pids[i] != tgid)
			c = read_code(sp->pids[i], &sp->lay, f->code, f->check, &freed);
	if (c)
		py->st.codes_read++;
	else
		py->st.codes_failed++;
	py->st.codes_freed += c && freed;
	/* Remember failures too (as NULL) so dead workers are not re-read. */
	if (gs_hmap_put(&sp->codes, key, (uintptr_t)c)) {
		if (c)
			gs_py_code_free(c);
		return NULL;
	}
	*is_new = c != NULL;
	return c;
}

int gs_py_note_frames(struct gs_py *py, uint32_t tgid, const struct gs_py_frame *frames, uint32_t n)
{
	int fresh = 0;

	for (uint32_t i = 0; i < n; i++) {
		bool is_new;

		code_get(py, tgid, &frames[i], &is_new);
		fresh += is_new;
	}
	return fresh;
}

static uint32_t python_mapping(struct gs_py *py)
{
	if (!py->mapping) {
		struct gs_mapping m = {
			.file = gs_profile_intern(py->p, "[python]"),
			.has_functions = true,
			.has_filenames = true,
			.has_lines = true,
		};

		py->mapping = gs_profile_add_mapping(py->p, &m);
	}
	return py->mapping;
}

static uint32_t location_for(struct gs_py *py, uint32_t fn, int64_t line, enum gs_frame_kind kind)
{
	uint64_t key = (uint64_t)fn << 32 | (uint32_t)line, v;
	struct gs_line l = { .function = fn, .line = line };

	if (!fn)
		return 0;
	if (map_get(&py->locs, key, &v))
		return (uint32_t)v;
	uint32_t loc = gs_profile_add_location(py->p, python_mapping(py), 0, kind, &l, 1);

	if (loc && gs_hmap_put(&py->locs, key, loc))
		return loc;
	return loc;
}

static uint32_t special_function(struct gs_py *py, const char *name)
{
	struct gs_function fn = { .name = gs_profile_intern(py->p, name) };

	return gs_profile_add_function(py->p, &fn);
}

uint32_t gs_py_location(struct gs_py *py, uint32_t tgid, const struct gs_py_frame *f)
{
	bool is_new;
	struct py_code *c = code_get(py, tgid, f, &is_new);

	py->st.frames++;
	if (!c) {
		py->st.frames_unknown++;
		if (!py->unknown_fn)
			py->unknown_fn = special_function(py, "[unknown python]");
		return location_for(py, py->unknown_fn, 0, GS_FRAME_PYTHON);
	}
	if (!c->function) {
		struct gs_function fn = {
			.name = gs_profile_intern(py->p,
						  c->qualname[0] ? c->qualname : "[anonymous]"),
			.file = gs_profile_intern(py->p, c->filename),
			.start_line = c->firstlineno,
		};

		c->function = gs_profile_add_function(py->p, &fn);
	}
	int line = gs_py_addr2line(c->version_hex, c->table, c->table_len, c->firstlineno,
				   f->lasti);

	return location_for(py, c->function, line < 0 ? 0 : line, GS_FRAME_PYTHON);
}

void gs_py_get_stats(const struct gs_py *py, struct gs_py_stats *st)
{
	*st = py->st;
}

uint32_t gs_py_truncated_location(struct gs_py *py)
{
	if (!py->trunc_loc) {
		uint32_t fn = special_function(py, "[truncated python stack]");

		py->trunc_loc = location_for(py, fn, 0, GS_FRAME_SPECIAL);
	}
	return py->trunc_loc;
}
