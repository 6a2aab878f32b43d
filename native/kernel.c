/* SPDX-License-Identifier: MIT */
/*
 * Kernel text symbols from /proc/kallsyms: text (t/T) and weak (w/W)
 * symbols, sorted once, binary-searched per address.  Module symbols keep
 * their module name ("nvidia") so the profile can show them under "[nvidia]"
 * as perf does.  Addresses read as 0 when kptr_restrict hides them from us
 * (not root): all_zero is set and every kernel frame becomes "[unknown]".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "native/sym_internal.h"

static int ksym_cmp(const void *a, const void *b)
{
	const struct gs_ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* aliases at one address: the global one (__x64_sys_getpid over
	 * __do_sys_getpid), then the one with fewer leading underscores, as
	 * perf's choose_best_symbol does */
	if (x->global != y->global)
		return x->global ? -1 : 1;
	size_t ux = strspn(x->name, "_"), uy = strspn(y->name, "_");
	if (ux != uy)
		return ux < uy ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int module_index(struct gs_kallsyms *k, const char *name, size_t len)
{
	/* kallsyms lists a module's symbols together: check the last first */
	for (size_t i = k->n_modules; i-- > 1;)
		if (strlen(k->modules[i]) == len && !memcmp(k->modules[i], name, len))
			return (int)i;
	if (GS_GROW(k->modules, k->cap_modules, k->n_modules + 1))
		return -ENOMEM;
	if (!(k->modules[k->n_modules] = strndup(name, len)))
		return -ENOMEM;
	return (int)k->n_modules++;
}

static int parse(struct gs_kallsyms *k, FILE *f)
{
	char *line = NULL;
	size_t cap = 0, scap = 0;
	ssize_t len;
	int err = 0;
	uint64_t nonzero = 0;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = 0;
		char *end;
		uint64_t addr = strtoull(line, &end, 16);
		if (end == line || end[0] != ' ' || !end[1] || end[2] != ' ')
			continue;
		char type = end[1];
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		char *name = end + 3, *tab = strchr(name, '\t');
		int mod = 0;
		if (tab) {
			*tab = 0;
			char *m = strchr(tab + 1, '['), *e = m ? strchr(m, ']') : NULL;
			if (m && e && (mod = module_index(k, m + 1, (size_t)(e - m - 1))) < 0) {
				err = mod;
				break;
			}
		}
		if ((err = gs_grow_from((void **)&k->s, &scap, k->n + 1, sizeof(*k->s), 65536)))
			break;
		char *nm = strdup(name);
		if (!nm) {
			err = -ENOMEM;
			break;
		}
		k->s[k->n++] = (struct gs_ksym){ addr, nm, (uint32_t)mod,
						 type == 'T' || type == 'W' };
		nonzero |= addr;
	}
	free(line);
	if (!err) {
		qsort(k->s, k->n, sizeof(*k->s), ksym_cmp);
		k->all_zero = nonzero == 0;
	}
	return err;
}

int gs_kallsyms_load(struct gs_kallsyms *k, const char *path)
{
	memset(k, 0, sizeof(*k));
	k->loaded = true;
	if (GS_GROW(k->modules, k->cap_modules, 1))
		return -ENOMEM;
	k->modules[0] = NULL;
	k->n_modules = 1;
	FILE *f = fopen(path ? path : "/proc/kallsyms", "re");
	if (!f)
		return -errno;
	int err = parse(k, f);
	fclose(f);
	return err;
}

void gs_kallsyms_free(struct gs_kallsyms *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->s[i].name);
	for (size_t i = 1; i < k->n_modules; i++)
		free(k->modules[i]);
	free(k->modules);
	free(k->s);
	memset(k, 0, sizeof(*k));
}

const struct gs_ksym *gs_kallsyms_find(const struct gs_kallsyms *k, uint64_t addr)
{
	if (k->all_zero)
		return NULL;
	size_t lo = GS_UPPER_BOUND(k->s, k->n, addr, addr);
	if (!lo)
		return NULL;
	/* several names at one address: the first in sorted order */
	size_t i = lo - 1;
	while (i > 0 && k->s[i - 1].addr == k->s[i].addr)
		i--;
	return &k->s[i];
}
