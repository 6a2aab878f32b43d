/* SPDX-License-Identifier: MIT */
/*
 * The one cache of ELF objects: by dev:inode (every file seen, several
 * per object when the same library is reached through other paths or
 * inodes) and by key (build-id).  Both indexes are util/hashmap.h over
 * arrays held here.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <elfutils/libdwelf.h>
#include "proc/proc.h"
#include "util/hash.h"
#include "util/hashmap.h"
#include "util/vec.h"

struct file_alias {
	uint64_t dev, ino;
	uint32_t obj;
};

struct gs_elf_cache {
	unsigned refs;
	struct gs_elf_obj **objs;
	size_t n_objs, cap_objs;
	struct file_alias *files;
	size_t n_files, cap_files;
	struct gs_hmap by_file; /* hash(dev, ino) -> index in files */
	struct gs_hmap by_key;  /* hash(key) -> index in objs (build-id keys only) */
	struct gs_elf_stats st;
};

static size_t fd_budget(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 65536;
	if (rl.rlim_cur < GS_ELF_FD_RESERVE + GS_ELF_FD_MIN)
		return GS_ELF_FD_MIN;
	return (size_t)rl.rlim_cur - GS_ELF_FD_RESERVE;
}

struct gs_elf_cache *gs_elf_cache_new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	struct gs_elf_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->refs = 1;
	c->st.max_fds = fd_budget();
	return c;
}

struct gs_elf_cache *gs_elf_cache_ref(struct gs_elf_cache *c)
{
	c->refs++;
	return c;
}

static void obj_free(struct gs_elf_obj *o)
{
	if (o->elf)
		elf_end(o->elf);
	if (o->fd >= 0)
		close(o->fd);
	free(o->loads);
	free(o->path);
	free(o);
}

void gs_elf_cache_put(struct gs_elf_cache *c)
{
	if (!c || --c->refs > 0)
		return;
	for (size_t i = 0; i < c->n_objs; i++)
		obj_free(c->objs[i]);
	free(c->objs);
	free(c->files);
	gs_hmap_free(&c->by_file);
	gs_hmap_free(&c->by_key);
	free(c);
}

static uint64_t file_hash(uint64_t dev, uint64_t ino)
{
	return gs_hash_combine(gs_mix64(dev), ino);
}

struct file_q {
	const struct gs_elf_cache *c;
	uint64_t dev, ino;
};

static bool file_eq(const void *ctx, uint64_t val)
{
	const struct file_q *q = ctx;
	const struct file_alias *f = &q->c->files[val];

	return f->dev == q->dev && f->ino == q->ino;
}

struct gs_elf_obj *gs_elf_find(const struct gs_elf_cache *c, uint64_t dev, uint64_t ino)
{
	struct file_q q = { c, dev, ino };
	uint64_t *v = gs_hmap_find_by(&c->by_file, file_hash(dev, ino), file_eq, &q);

	return v ? c->objs[c->files[*v].obj] : NULL;
}

struct key_q {
	const struct gs_elf_cache *c;
	const char *key;
};

static bool key_eq(const void *ctx, uint64_t val)
{
	const struct key_q *q = ctx;

	return !strcmp(q->c->objs[val]->key, q->key);
}

static int alias_add(struct gs_elf_cache *c, uint64_t dev, uint64_t ino, uint32_t obj)
{
	struct file_alias f = { dev, ino, obj };

	if (!ino) /* no identity to find it by again */
		return 0;
	if (GS_PUSH(c->files, c->n_files, c->cap_files, f))
		return -ENOMEM;
	if (gs_hmap_add(&c->by_file, file_hash(dev, ino), c->n_files - 1)) {
		c->n_files--;
		return -ENOMEM;
	}
	return 0;
}

/* An unsigned field of w bytes at p, in the file's byte order. */
static uint64_t field(const unsigned char *p, size_t w, bool msb)
{
	uint64_t v = 0;

	for (size_t i = 0; i < w; i++)
		v |= (uint64_t)p[msb ? w - 1 - i : i] << (8 * i);
	return v;
}

/* A table of n entries of ent bytes at off: within the file's size, and
 * (sparse files: a 24 KB file claimed 16M sections) within what the file
 * really holds on disk. */
static bool table_fits(uint64_t off, uint64_t n, uint64_t ent, const struct stat *st)
{
	uint64_t bytes = n * ent, disk = (uint64_t)st->st_blocks * 512;

	if (off > (uint64_t)st->st_size || bytes > (uint64_t)st->st_size - off)
		return false;
	/* st_blocks 0: data inline in the inode, or a file system that does
	 * not say; compressed file systems report less than the size, still
	 * far more than the few KB of a real library's tables */
	return !st->st_blocks || bytes <= disk + 65536;
}

int gs_elf_headers_check(int fd, const char **why)
{
	unsigned char h[64], s0[64];
	struct stat st;
	const char *dummy;

	why = why ? why : &dummy;
	*why = NULL;
	if (fstat(fd, &st) || pread(fd, h, sizeof(h), 0) < 52 || memcmp(h, ELFMAG, SELFMAG))
		return 0; /* not ELF (or unreadable): libelf says so itself */
	bool b64 = h[EI_CLASS] == ELFCLASS64, msb = h[EI_DATA] == ELFDATA2MSB;
	/* e_phoff, e_shoff, then e_phentsize..e_shstrndx (6 half words) */
	size_t w = b64 ? 8 : 4, at = b64 ? 32 : 28, half = b64 ? 54 : 42;
	uint64_t phoff = field(h + at, w, msb), shoff = field(h + at + w, w, msb);
	uint64_t phent = field(h + half, 2, msb), phnum = field(h + half + 2, 2, msb);
	uint64_t shent = field(h + half + 4, 2, msb), shnum = field(h + half + 6, 2, msb);
	uint64_t min_ph = b64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	uint64_t min_sh = b64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);

	if (shoff && (shnum == 0 || phnum == PN_XNUM)) {
		/* the extended forms: the real counts are in section 0 */
		if (shent < min_sh || !table_fits(shoff, 1, min_sh, &st) ||
		    pread(fd, s0, min_sh, (off_t)shoff) != (ssize_t)min_sh) {
			*why = "section 0 (extended counts) outside the file";
			return -EFBIG;
		}
		if (shnum == 0) /* sh_size */
			shnum = field(s0 + (b64 ? 32 : 20), w, msb);
		if (phnum == PN_XNUM) /* sh_info */
			phnum = field(s0 + (b64 ? 44 : 28), 4, msb);
	}
	if (phnum > GS_ELF_PHNUM_MAX ||
	    (phnum && (phent < min_ph || !table_fits(phoff, phnum, phent, &st)))) {
		*why = "program header count beyond the file or the limit";
		return -EFBIG;
	}
	if (shoff && (shnum > GS_ELF_SHNUM_MAX ||
		      (shnum && (shent < min_sh || !table_fits(shoff, shnum, shent, &st))))) {
		*why = "section count beyond the file or the limit";
		return -EFBIG;
	}
	return 0;
}

/* Build-id and PT_LOADs by pread; o->elf stays open for later readers. */
static void read_facts(struct gs_elf_obj *o)
{
	const void *bid;
	size_t phnum = 0;

	if (gs_elf_headers_check(o->fd, &o->skipped)) {
		/* before libelf: it allocates per claimed section and header */
		close(o->fd);
		o->fd = -1;
		o->err = -EFBIG;
		return;
	}
	o->elf = elf_begin(o->fd, ELF_C_READ, NULL);
	if (o->elf && elf_kind(o->elf) != ELF_K_ELF) {
		/* a data file mapped at offset 0 (locale-archive, a dataset):
		 * nobody reads it, so it must not hold one of the bounded fds */
		elf_end(o->elf);
		o->elf = NULL;
	}
	if (!o->elf) {
		close(o->fd);
		o->fd = -1;
		o->err = -ENOEXEC;
		return;
	}
	ssize_t n = dwelf_elf_gnu_build_id(o->elf, &bid);
	for (ssize_t i = 0; n > 0 && n <= 20 && i < n; i++)
		snprintf(o->build_id + 2 * i, 3, "%02x", ((const uint8_t *)bid)[i]);
	if (elf_getphdrnum(o->elf, &phnum) || !phnum ||
	    !(o->loads = calloc(phnum, sizeof(GElf_Phdr))))
		return;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(o->elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			o->loads[o->n_loads++] = ph;
	}
}

/* pfd (O_PATH, closed here) reopened for reading if it is a regular file. */
static int reopen_regular(int pfd, struct stat *st)
{
	char self[40];
	int fd;

	/* What the path leads to is looked at before anything opens it: opening
	 * a device (a planted link to /dev/watchdog, a tape) acts on it. */
	if (fstat(pfd, st) || !S_ISREG(st->st_mode)) {
		close(pfd);
		return -EPERM;
	}
	/* Reopened through the descriptor: the same inode, no second lookup. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	fd = fd < 0 ? -errno : fd;
	close(pfd);
	return fd;
}

int gs_open_regular(const char *path, int extra_flags, struct stat *st)
{
	int pfd = open(path, O_PATH | O_CLOEXEC | extra_flags);

	return pfd < 0 ? -errno : reopen_regular(pfd, st);
}

int gs_open_regular_at(int dirfd, const char *path, int extra_flags, uint64_t resolve,
		       struct stat *st)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC | (uint64_t)extra_flags,
				.resolve = resolve };
	int pfd = (int)syscall(__NR_openat2, dirfd, path, &how, sizeof(how));

	return pfd < 0 ? -errno : reopen_regular(pfd, st);
}

/* The first path that opens to the very file the kernel mapped: the
 * /proc/PID/root path resolves links the target planted (an absolute one
 * points into our root, not its), so only the (dev, inode) of the mapping
 * vouches for what was opened. */
static int open_first(const char *const *paths, size_t n, uint64_t dev, uint64_t ino)
{
	int err = -ENOENT;

	for (size_t i = 0; i < n; i++) {
		struct stat st;
		int fd = gs_open_regular(paths[i], 0, &st);

		if (fd < 0) {
			err = fd == -EPERM ? -ESTALE : fd;
			continue;
		}
		if (!ino || (st.st_ino == ino && st.st_dev == dev))
			return fd;
		close(fd);
		err = -ESTALE;
	}
	return err;
}

/* Over the fd bound: keep the facts, give the fd back. */
static void enforce_budget(struct gs_elf_cache *c, struct gs_elf_obj *o)
{
	if (o->fd < 0)
		return;
	if (c->st.open_fds < c->st.max_fds) {
		c->st.open_fds++;
		return;
	}
	if (o->elf)
		elf_end(o->elf);
	o->elf = NULL;
	close(o->fd);
	o->fd = -1;
	o->err = -EMFILE;
	c->st.fd_refused++;
}

static int insert(struct gs_elf_cache *c, struct gs_elf_obj *o)
{
	uint32_t id = (uint32_t)c->n_objs;

	o->id = id;
	if (GS_PUSH(c->objs, c->n_objs, c->cap_objs, o))
		return -ENOMEM;
	if (o->build_id[0] && gs_hmap_add(&c->by_key, gs_hash_str(o->key), id)) {
		c->n_objs--;
		return -ENOMEM;
	}
	if (alias_add(c, o->dev, o->ino, id)) {
		if (o->build_id[0])
			gs_hmap_del_entry(&c->by_key, gs_hash_str(o->key), id);
		c->n_objs--;
		return -ENOMEM;
	}
	c->st.objects++;
	enforce_budget(c, o);
	return 0;
}

int gs_elf_get(struct gs_elf_cache *c, const char *path, const char *const *open_paths,
	       size_t n_open, uint64_t dev, uint64_t ino, struct gs_elf_obj **out)
{
	struct gs_elf_obj *o = gs_elf_find(c, dev, ino);

	if (o) {
		*out = o;
		return 0;
	}
	if (!(o = calloc(1, sizeof(*o))) || !(o->path = strdup(path))) {
		free(o);
		return -ENOMEM;
	}
	o->dev = dev;
	o->ino = ino;
	o->fd = open_first(open_paths, n_open, dev, ino);
	if (o->fd >= 0)
		read_facts(o);
	else
		o->err = o->fd, o->fd = -1;
	if (o->build_id[0])
		snprintf(o->key, sizeof(o->key), "%s", o->build_id);
	else
		snprintf(o->key, sizeof(o->key), "%llx:%llu", (unsigned long long)dev,
			 (unsigned long long)ino);
	/* Same build-id under another path or inode: one object, one more
	 * file.  A file we could not open is never shared by build-id. */
	struct key_q q = { c, o->key };
	uint64_t *same = o->build_id[0]
			     ? gs_hmap_find_by(&c->by_key, gs_hash_str(o->key), key_eq, &q)
			     : NULL;
	if (same) {
		uint32_t id = (uint32_t)*same;

		obj_free(o);
		if (alias_add(c, dev, ino, id))
			return -ENOMEM;
		*out = c->objs[id];
		return 0;
	}
	int err = insert(c, o);
	if (!err && o->skipped && !c->st.skipped++)
		c->st.first_skipped = o;
	if (err) {
		obj_free(o);
		return err;
	}
	*out = o;
	return 0;
}

bool gs_elf_off_to_vaddr(const struct gs_elf_obj *o, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < o->n_loads; i++) {
		const GElf_Phdr *ph = &o->loads[i];
		if (off >= ph->p_offset && off < ph->p_offset + ph->p_memsz) {
			*vaddr = off - ph->p_offset + ph->p_vaddr;
			return true;
		}
	}
	/* map offsets are page-aligned, p_offset may not be: use the segment
	 * whose page-aligned start matches. */
	for (size_t i = 0; i < o->n_loads; i++) {
		const GElf_Phdr *ph = &o->loads[i];
		uint64_t al = ph->p_align > 1 ? ph->p_align : 4096;
		if (al > 4096)
			al = 4096;
		uint64_t start = ph->p_offset & ~(al - 1);
		if (off >= start && off < ph->p_offset + ph->p_memsz) {
			*vaddr = off - ph->p_offset + ph->p_vaddr;
			return true;
		}
	}
	return false;
}

void gs_elf_stats(const struct gs_elf_cache *c, struct gs_elf_stats *st)
{
	*st = c->st;
}

/* One stapsdt note: pc, base, semaphore (ELF class words), then the
 * provider, name and argument strings. */
static bool note_has_provider(const GElf_Nhdr *nh, const char *name, const char *desc, size_t word,
			      const char *provider)
{
	if (nh->n_type != 3 /* NT_STAPSDT */ || nh->n_namesz != 8 || memcmp(name, "stapsdt", 8) ||
	    nh->n_descsz <= 3 * word)
		return false;
	size_t n = nh->n_descsz - 3 * word;
	const char *prov = desc + 3 * word;
	return strnlen(prov, n) < n && !strcmp(prov, provider);
}

int gs_elf_usdt_provider(const struct gs_elf_obj *o, const char *provider)
{
	size_t shstrndx, word;
	Elf_Scn *scn = NULL;

	if (!o->elf || elf_kind(o->elf) != ELF_K_ELF || elf_getshdrstrndx(o->elf, &shstrndx))
		return 0;
	word = gelf_getclass(o->elf) == ELFCLASS32 ? 4 : 8;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		const char *sname;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(sname = elf_strptr(o->elf, shstrndx, sh.sh_name)) ||
		    strcmp(sname, ".note.stapsdt"))
			continue;
		if (sh.sh_size > GS_ELF_NOTES_MAX)
			return -EIO;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			return -EIO;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off, next;
		while ((next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (note_has_provider(&nh, (const char *)d->d_buf + name_off,
					      (const char *)d->d_buf + desc_off, word, provider))
				return 1;
			off = next;
		}
	}
	return 0;
}

/* The two ways to the file of mapping l: map_files (the mapped file
 * itself, root only) and the path inside the target's root. */
struct mapped_paths {
	char map_files[80];
	/* "/proc/PID/root" + a maps path: larger than PATH_MAX, so a path the
	 * target made too long is cut only past PATH_MAX, and the kernel
	 * refuses it (ENAMETOOLONG) rather than opening a shorter prefix */
	char root[4200];
};

static void mapped_paths(uint32_t tgid, const struct gs_maps_line *l, struct mapped_paths *mp)
{
	snprintf(mp->map_files, sizeof(mp->map_files), "/proc/%u/map_files/%llx-%llx", tgid,
		 (unsigned long long)l->start, (unsigned long long)l->end);
	snprintf(mp->root, sizeof(mp->root), "/proc/%u/root%s", tgid, l->path);
}

int gs_elf_get_mapped(struct gs_elf_cache *c, uint32_t tgid, const struct gs_maps_line *l,
		      struct gs_elf_obj **out)
{
	struct mapped_paths mp;
	const char *paths[] = { mp.map_files, mp.root };
	uint64_t dev = makedev(l->dev_major, l->dev_minor);

	if (!l->path || !l->inode)
		return -EINVAL;
	if ((*out = gs_elf_find(c, dev, l->inode)))
		return 0;
	mapped_paths(tgid, l, &mp);
	return gs_elf_get(c, l->path, paths, 2, dev, l->inode, out);
}

int gs_proc_open_mapped(uint32_t tgid, const struct gs_maps_line *l)
{
	struct mapped_paths mp;
	const char *paths[] = { mp.map_files, mp.root };

	if (!l->path || !l->inode)
		return -EINVAL;
	mapped_paths(tgid, l, &mp);
	return open_first(paths, 2, makedev(l->dev_major, l->dev_minor), l->inode);
}
