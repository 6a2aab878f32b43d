// SPDX-License-Identifier: MIT
/*
 * CUPTI PC sampling alone, without gpusample or its agent: the device kit's
 * first question on a GPU host is whether CUPTI samples at all there
 * (driver, permissions, device).  Loads libcuda and libcupti with dlopen
 * (types from the CUDA 13.0 headers at build time only), creates a context,
 * loads a cubin, enables continuous PC sampling with every stall reason
 * and a 16 MB scratch buffer, launches axpy LAUNCHES times, drains with
 * cuptiPCSamplingGetData and prints what came back.
 *
 * PC records are laid out with the stride of the running libcupti, not of
 * the headers built against: CUPTI API v22 (CUDA 12.4, cupti_version.h
 * "v22 : CUDA Toolkit 12.4") added CUpti_PCSamplingPCData.correlationId
 * (cupti_pcsampling.h:159-163), taking the record from 56 to 64 bytes, and
 * CUPTI writes the array with its own stride.  A cu118/cu121 torch brings a
 * libcupti before v22: 56-byte records.  The stride is printed.
 *
 * Then what only a GPU settles for gpusample's agent, printed, not judged:
 * which key PC records carry with a CRC callback registered (the
 * callback's value or CUPTI's own cuptiGetCubinCrc), how many distinct
 * functionName pointers 20 drains hand out (1 per function: shared, as
 * the header allows; more: allocated per GetData), and what Enable returns
 * from a second thread while kernels of the context run, and where the PCs
 * of a range closed by a module reload or by a kernel-serialized kernel go
 * (parked in the configured buffer, or kept for GetData).
 *
 * usage: pcsamp_probe LIBCUDA LIBCUPTI CUBIN [LAUNCHES]
 * Prints "probe: <step>: <result>" lines and a final "probe: ok ..." line;
 * exit 0 ok, 1 a step failed (the line says which and CUPTI's reason).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

static void *need(void *lib, const char *name)
{
	void *f = dlsym(lib, name);
	if (!f) {
		printf("probe: %s missing: %s\n", name, dlerror());
		exit(1);
	}
	return f;
}
#define BIND(lib, var, name) (*(void **)&(var) = need(lib, name))

static CUptiResult (*pcs_result_string)(CUptiResult, const char **);
static size_t stride; /* CUpti_PCSamplingPCData size of the running libcupti */

static CUpti_PCSamplingPCData *PC(CUpti_PCSamplingData *d, size_t i)
{
	return (CUpti_PCSamplingPCData *)((char *)d->pPcData + i * stride);
}

/* Stall-reason samples of d's totalNumPcs records; the first kernel name. */
static unsigned long long tally(CUpti_PCSamplingData *d, char *first_fn, size_t len)
{
	unsigned long long samples = 0;

	if (d->totalNumPcs > d->collectNumPcs)
		d->totalNumPcs = d->collectNumPcs;
	if (d->totalNumPcs && !first_fn[0] && PC(d, 0)->functionName)
		snprintf(first_fn, len, "%s", PC(d, 0)->functionName);
	for (size_t i = 0; i < d->totalNumPcs; i++)
		for (size_t k = 0; k < PC(d, i)->stallReasonCount; k++)
			samples += PC(d, i)->stallReason[k].samples;
	return samples;
}

/* CRC keying: the registered callback's value for the cubin, and CUPTI's
 * own CRC of it; PC records counted by the key they carry. */
#define PROBE_CRC_MARK 0x70726f6265435243ull /* "probeCRC" */
static uint64_t own_crc;
static unsigned long long by_callback, by_cupti, by_other;

static void CUPTIAPI probe_crc(const void *cubin, size_t size, uint64_t *crc)
{
	(void)cubin;
	*crc = PROBE_CRC_MARK ^ size;
}

static void keying(CUpti_PCSamplingData *d, size_t cubin_size)
{
	for (size_t i = 0; i < d->totalNumPcs && i < d->collectNumPcs; i++) {
		uint64_t k = PC(d, i)->cubinCrc;
		if (k == (PROBE_CRC_MARK ^ cubin_size))
			by_callback++;
		else if (own_crc && k == own_crc)
			by_cupti++;
		else
			by_other++;
	}
}

/* Distinct functionName pointers handed out over the drains (capped). */
static const char *names_seen[256];
static size_t n_names_seen;

static void note_names(CUpti_PCSamplingData *d)
{
	for (size_t i = 0; i < d->totalNumPcs && i < d->collectNumPcs; i++) {
		const char *p = PC(d, i)->functionName;
		size_t k = 0;
		while (k < n_names_seen && names_seen[k] != p)
			k++;
		if (k == n_names_seen && n_names_seen < 256)
			names_seen[n_names_seen++] = p;
	}
}

/* Enable from a thread that neither created the context nor launches on it. */
struct second_enable {
	CUptiResult (*Enable)(CUpti_PCSamplingEnableParams *);
	CUcontext ctx;
	CUptiResult r;
};

static void *enable_from_second_thread(void *arg)
{
	struct second_enable *e = arg;
	CUpti_PCSamplingEnableParams ep = { .size = CUpti_PCSamplingEnableParamsSize,
					    .ctx = e->ctx };

	e->r = e->Enable(&ep);
	return NULL;
}

static void cupti_ok(CUptiResult r, const char *what)
{
	const char *s = "?";
	if (r == CUPTI_SUCCESS)
		return;
	pcs_result_string(r, &s);
	printf("probe: %s: %s (%d)\n", what, s, (int)r);
	exit(1);
}

static void cu_ok(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS) {
		printf("probe: %s: CUresult %d\n", what, (int)r);
		exit(1);
	}
}

static void *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *b;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) ||
	    !(b = malloc(n)) || fread(b, 1, n, f) != (size_t)n) {
		printf("probe: cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	*size = (size_t)n;
	return b;
}

int main(int argc, char **argv)
{
	CUresult (*Init)(unsigned), (*DevGet)(CUdevice *, int),
	    (*CtxCreate)(CUcontext *, unsigned, CUdevice), (*ModLoad)(CUmodule *, const void *),
	    (*GetFn)(CUfunction *, CUmodule, const char *),
	    (*Launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		      unsigned, CUstream, void **, void **),
	    (*Sync)(void), (*MemAlloc)(CUdeviceptr *, size_t), (*ModUnload)(CUmodule);
	CUptiResult (*NumReasons)(CUpti_PCSamplingGetNumStallReasonsParams *),
	    (*Reasons)(CUpti_PCSamplingGetStallReasonsParams *),
	    (*Enable)(CUpti_PCSamplingEnableParams *), (*Disable)(CUpti_PCSamplingDisableParams *),
	    (*SetCfg)(CUpti_PCSamplingConfigurationInfoParams *),
	    (*GetData)(CUpti_PCSamplingGetDataParams *), (*Version)(uint32_t *);

	if (argc < 4) {
		fprintf(stderr, "usage: pcsamp_probe LIBCUDA LIBCUPTI CUBIN [LAUNCHES]\n");
		return 2;
	}
	int launches = argc > 4 ? atoi(argv[4]) : 200;
	void *cu = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL), *cp;
	if (!cu) {
		printf("probe: dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	BIND(cu, Init, "cuInit");
	BIND(cu, DevGet, "cuDeviceGet");
	BIND(cu, CtxCreate, "cuCtxCreate_v2");
	BIND(cu, ModLoad, "cuModuleLoadData");
	BIND(cu, GetFn, "cuModuleGetFunction");
	BIND(cu, Launch, "cuLaunchKernel");
	BIND(cu, Sync, "cuCtxSynchronize");
	BIND(cu, MemAlloc, "cuMemAlloc_v2");
	BIND(cu, ModUnload, "cuModuleUnload");
	cu_ok(Init(0), "cuInit");
	if (!(cp = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL))) {
		printf("probe: dlopen %s: %s\n", argv[2], dlerror());
		return 1;
	}
	BIND(cp, pcs_result_string, "cuptiGetResultString");
	BIND(cp, Version, "cuptiGetVersion");
	BIND(cp, NumReasons, "cuptiPCSamplingGetNumStallReasons");
	BIND(cp, Reasons, "cuptiPCSamplingGetStallReasons");
	BIND(cp, Enable, "cuptiPCSamplingEnable");
	BIND(cp, Disable, "cuptiPCSamplingDisable");
	BIND(cp, SetCfg, "cuptiPCSamplingSetConfigurationAttribute");
	BIND(cp, GetData, "cuptiPCSamplingGetData");
	uint32_t ver = 0;
	cupti_ok(Version(&ver), "cuptiGetVersion");
	printf("probe: libcupti %s API %u\n", argv[2], ver);

	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	cu_ok(DevGet(&dev, 0), "cuDeviceGet");
	cu_ok(CtxCreate(&ctx, 0, dev), "cuCtxCreate");
	CUptiResult (*RegisterCrc)(CUpti_ComputeCrcCallbackFunc) = (CUptiResult(*)(
	    CUpti_ComputeCrcCallbackFunc))dlsym(cp, "cuptiRegisterComputeCrcCallback");
	CUptiResult (*CubinCrc)(CUpti_GetCubinCrcParams *) =
	    (CUptiResult(*)(CUpti_GetCubinCrcParams *))dlsym(cp, "cuptiGetCubinCrc");
	size_t cubin_size = 0;
	void *image = slurp(argv[3], &cubin_size);
	CUptiResult crc_r = RegisterCrc ? RegisterCrc(probe_crc) : CUPTI_ERROR_NOT_SUPPORTED;
	if (CubinCrc) {
		CUpti_GetCubinCrcParams cc = { .size = CUpti_GetCubinCrcParamsSize,
					       .cubinSize = cubin_size,
					       .cubin = image };
		if (CubinCrc(&cc) == CUPTI_SUCCESS)
			own_crc = cc.cubinCrc;
	}
	cu_ok(ModLoad(&mod, image), "cuModuleLoadData");
	cu_ok(GetFn(&fn, mod, "axpy"), "cuModuleGetFunction(axpy)");

	CUpti_PCSamplingEnableParams ep = { .size = CUpti_PCSamplingEnableParamsSize, .ctx = ctx };
	cupti_ok(Enable(&ep), "cuptiPCSamplingEnable");
	size_t n = 0;
	CUpti_PCSamplingGetNumStallReasonsParams np = {
		.size = CUpti_PCSamplingGetNumStallReasonsParamsSize,
		.ctx = ctx,
		.numStallReasons = &n
	};
	cupti_ok(NumReasons(&np), "cuptiPCSamplingGetNumStallReasons");
	uint32_t *idx = calloc(n, sizeof(*idx));
	char **names = calloc(n, sizeof(*names));
	for (size_t i = 0; i < n; i++)
		names[i] = calloc(1, CUPTI_STALL_REASON_STRING_SIZE);
	CUpti_PCSamplingGetStallReasonsParams sp = { .size =
							 CUpti_PCSamplingGetStallReasonsParamsSize,
						     .ctx = ctx,
						     .numStallReasons = n,
						     .stallReasonIndex = idx,
						     .stallReasons = names };
	cupti_ok(Reasons(&sp), "cuptiPCSamplingGetStallReasons");
	printf("probe: %zu stall reasons (first: %s)\n", n, n ? names[0] : "-");

	enum { NPC = 4096 };
	/* CUpti_PCSamplingData.size as the running libcupti knows the struct:
	 * nonUsrKernelsTotalSamples came with v16 (CUDA 11.5), hardwareBufferFull
	 * with v19 (CUDA 12.0) */
	CUpti_PCSamplingData cfg = { .collectNumPcs = NPC }, get;
	cfg.size = ver >= 19   ? sizeof(cfg)
		   : ver >= 16 ? offsetof(CUpti_PCSamplingData, hardwareBufferFull)
			       : offsetof(CUpti_PCSamplingData, nonUsrKernelsTotalSamples);
	get = cfg;
	stride = ver >= 22 ? 64 : 56;
	printf("probe: PC record stride %zu bytes (CUPTI API %u)\n", stride, ver);
	cfg.pPcData = calloc(NPC, stride);
	get.pPcData = calloc(NPC, stride);
	for (size_t i = 0; i < NPC; i++) {
		PC(&cfg, i)->size = PC(&get, i)->size = stride;
		PC(&cfg, i)->stallReason = calloc(n, sizeof(CUpti_PCSamplingStallReason));
		PC(&get, i)->stallReason = calloc(n, sizeof(CUpti_PCSamplingStallReason));
	}
	CUpti_PCSamplingConfigurationInfo a[4];
	memset(a, 0, sizeof(a));
	a[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
	a[0].attributeData.stallReasonData.stallReasonCount = n;
	a[0].attributeData.stallReasonData.pStallReasonIndex = idx;
	a[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
	a[1].attributeData.samplingDataBufferData.samplingDataBuffer = &cfg;
	a[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE;
	a[2].attributeData.scratchBufferSizeData.scratchBufferSize = 16 << 20;
	a[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
	a[3].attributeData.collectionModeData.collectionMode =
	    CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
	CUpti_PCSamplingConfigurationInfoParams cp_ = {
		.size = CUpti_PCSamplingConfigurationInfoParamsSize,
		.ctx = ctx,
		.numAttributes = 4,
		.pPCSamplingConfigurationInfo = a
	};
	cupti_ok(SetCfg(&cp_), "cuptiPCSamplingSetConfigurationAttribute");

	CUdeviceptr x, y;
	int len = 1 << 20;
	float alpha = 2.0f;
	cu_ok(MemAlloc(&x, len * sizeof(float)), "cuMemAlloc");
	cu_ok(MemAlloc(&y, len * sizeof(float)), "cuMemAlloc");
	void *params[] = { &alpha, &x, &y, &len };
	for (int i = 0; i < launches; i++)
		cu_ok(Launch(fn, len / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
		      "cuLaunchKernel");
	cu_ok(Sync(), "cuCtxSynchronize");

	unsigned long long pcs = 0, samples = 0, total = 0, dropped = 0;
	char first_fn[128] = "";
	CUpti_PCSamplingGetDataParams gp = { .size = CUpti_PCSamplingGetDataParamsSize,
					     .ctx = ctx,
					     .pcSamplingData = &get };
	do {
		get.totalNumPcs = get.remainingNumPcs = 0;
		cupti_ok(GetData(&gp), "cuptiPCSamplingGetData");
		pcs += get.totalNumPcs;
		total += get.totalSamples;
		dropped += get.droppedSamples;
		samples += tally(&get, first_fn, sizeof(first_fn));
		keying(&get, cubin_size);
	} while (get.remainingNumPcs);
	CUpti_PCSamplingDisableParams dp = { .size = CUpti_PCSamplingDisableParamsSize,
					     .ctx = ctx };
	cfg.totalNumPcs = 0;
	cupti_ok(Disable(&dp), "cuptiPCSamplingDisable");
	/* Disable copies what CUPTI still held into the configured buffer */
	pcs += cfg.totalNumPcs;
	samples += tally(&cfg, first_fn, sizeof(first_fn));
	keying(&cfg, cubin_size);
	printf("probe: CRC keying (callback %s): %llu PC records keyed by the callback's value, "
	       "%llu by cuptiGetCubinCrc's, %llu by neither\n",
	       crc_r == CUPTI_SUCCESS ? "registered" : "not registered", by_callback, by_cupti,
	       by_other);

	/* 20 drains of 10 launches each: how many name pointers CUPTI hands */
	cupti_ok(Enable(&ep), "cuptiPCSamplingEnable (20 drains)");
	cupti_ok(SetCfg(&cp_), "cuptiPCSamplingSetConfigurationAttribute (20 drains)");
	for (int d = 0; d < 20; d++) {
		for (int i = 0; i < 10; i++)
			cu_ok(Launch(fn, len / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
			      "cuLaunchKernel");
		cu_ok(Sync(), "cuCtxSynchronize");
		do {
			get.totalNumPcs = get.remainingNumPcs = 0;
			cupti_ok(GetData(&gp), "cuptiPCSamplingGetData (20 drains)");
			note_names(&get);
		} while (get.remainingNumPcs);
	}
	cupti_ok(Disable(&dp), "cuptiPCSamplingDisable (20 drains)");
	printf("probe: 20 drains: %zu distinct functionName pointers for 1 kernel (1: shared; "
	       "more: allocated per GetData)\n",
	       n_names_seen);

	/* Enable from a second thread while this one's kernels are queued */
	struct second_enable se = { .Enable = Enable, .ctx = ctx, .r = CUPTI_ERROR_UNKNOWN };
	pthread_t t2;
	for (int i = 0; i < launches; i++)
		cu_ok(Launch(fn, len / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
		      "cuLaunchKernel");
	const char *se_s = "?";
	if (pthread_create(&t2, NULL, enable_from_second_thread, &se) == 0)
		pthread_join(t2, NULL);
	cu_ok(Sync(), "cuCtxSynchronize");
	pcs_result_string(se.r, &se_s);
	printf("probe: Enable from a second thread while %d kernels were queued: %s (%d)\n",
	       launches, se_s, (int)se.r);
	if (se.r == CUPTI_SUCCESS)
		Disable(&dp);

	/* A module reload and kernel-serialized kernels close ranges: where
	 * their PCs go (parked in the configured buffer, or kept for GetData) */
	unsigned long long parked, drained;
	for (int serialized = 0; serialized < 2; serialized++) {
		a[3].attributeData.collectionModeData.collectionMode =
		    serialized ? CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED
			       : CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
		cfg.totalNumPcs = 0;
		cupti_ok(Enable(&ep), "cuptiPCSamplingEnable (ranges)");
		cupti_ok(SetCfg(&cp_), "cuptiPCSamplingSetConfigurationAttribute (ranges)");
		for (int i = 0; i < (serialized ? 2 : 10); i++)
			cu_ok(Launch(fn, len / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
			      "cuLaunchKernel");
		cu_ok(Sync(), "cuCtxSynchronize");
		if (!serialized) {
			cu_ok(ModUnload(mod), "cuModuleUnload");
			cu_ok(ModLoad(&mod, image), "cuModuleLoadData (reload)");
			cu_ok(GetFn(&fn, mod, "axpy"), "cuModuleGetFunction(axpy, reload)");
		}
		parked = cfg.totalNumPcs;
		cfg.totalNumPcs = 0;
		drained = 0;
		do {
			get.totalNumPcs = get.remainingNumPcs = 0;
			cupti_ok(GetData(&gp), "cuptiPCSamplingGetData (ranges)");
			drained += get.totalNumPcs;
		} while (get.remainingNumPcs);
		cupti_ok(Disable(&dp), "cuptiPCSamplingDisable (ranges)");
		printf(
		    "probe: %s: %llu PCs parked in the configured buffer, %llu by GetData after, "
		    "%llu at Disable\n",
		    serialized ? "2 kernel-serialized kernels, no flush between"
			       : "module unloaded and loaded again",
		    parked, drained, (unsigned long long)cfg.totalNumPcs);
	}
	/* The module was loaded with no CUPTI subscriber, as by a job whose
	 * agent is dormant: CUPTI must still name its kernels (gpusample's
	 * kernel-level attribution of such modules relies on it). */
	printf("probe: kernel named by CUPTI for a module loaded with no subscriber: %s\n",
	       first_fn[0] ? first_fn : "none");
	printf("probe: ok: %d launches of axpy: %llu PCs, %llu stall-reason samples, total %llu, "
	       "dropped %llu\n",
	       launches, pcs, samples, total, dropped);
	return samples ? 0 : 1;
}
