/* SPDX-License-Identifier: MIT */
/*
 * Private to output/pprof.c (the writer) and output/pprof_read.c (the
 * reader): the wire format both speak, named once.  Not a public contract.
 *
 * Field numbers of profile.proto (perftools.profiles,
 * tests/unit/golden/profile.proto), one enum per message, and of
 * gpusample's private message in Profile field PB_PROFILE_GS_META (unknown
 * to, and skipped by, pprof and speedscope), which carries back what
 * profile.proto has no place for:
 *   message GsMeta {
 *     uint32 version = 1;          // 1
 *     uint32 frequency_hz = 2;
 *     uint64 lost_samples = 3;
 *     repeated GsProcess process = 4;
 *     repeated int64 note = 5;     // string indices (packed)
 *     repeated uint32 location_kind = 6; // enum gs_frame_kind per Location (packed)
 *     repeated GsStep step = 7;    // training steps, by pid then number
 *   }
 *   message GsProcess { uint32 pid = 1; uint32 ppid = 2; int64 comm = 3;
 *     int64 role = 4; int64 python = 5; int64 gpu = 6; uint64 cpu_samples = 7;
 *     bool exited = 8;
 *     uint32 ns_pid = 9; }          // strings as string-table indices; ns_pid:
 *                                   // pid in its own pid namespace, 0 = pid
 *   message GsStep { uint32 pid = 1; uint32 tid = 2; uint32 number = 3;
 *     uint32 backwards = 4; bool by_optimizer = 5; uint64 mark_ns = 6;
 *     uint64 wall_ns = 7; uint64 start_ns = 8; uint64 end_ns = 9;
 *     repeated uint64 phase_ns = 10; } // struct gs_step; ns since the
 *                                   // profile's start; phase_ns packed, one
 *                                   // per enum gs_phase
 */
#ifndef GS_OUTPUT_PPROF_PROTO_H
#define GS_OUTPUT_PPROF_PROTO_H

/* Protobuf wire types, and a field's key (tag) as written before its value. */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
#define PB_KEY(field, wt) (((uint64_t)(field) << 3) | (uint64_t)(wt))

enum pb_profile {
	PB_PROFILE_SAMPLE_TYPE = 1,
	PB_PROFILE_SAMPLE = 2,
	PB_PROFILE_MAPPING = 3,
	PB_PROFILE_LOCATION = 4,
	PB_PROFILE_FUNCTION = 5,
	PB_PROFILE_STRING_TABLE = 6,
	PB_PROFILE_TIME_NANOS = 9,
	PB_PROFILE_DURATION_NANOS = 10,
	PB_PROFILE_PERIOD_TYPE = 11,
	PB_PROFILE_PERIOD = 12,
	PB_PROFILE_COMMENT = 13,
	PB_PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	PB_PROFILE_GS_META = 4751, /* gpusample's GsMeta */
};

enum pb_value_type { PB_VALUE_TYPE_TYPE = 1, PB_VALUE_TYPE_UNIT = 2 };

enum pb_sample { PB_SAMPLE_LOCATION_ID = 1, PB_SAMPLE_VALUE = 2, PB_SAMPLE_LABEL = 3 };

enum pb_label { PB_LABEL_KEY = 1, PB_LABEL_STR = 2, PB_LABEL_NUM = 3, PB_LABEL_NUM_UNIT = 4 };

enum pb_mapping {
	PB_MAPPING_ID = 1,
	PB_MAPPING_MEMORY_START = 2,
	PB_MAPPING_MEMORY_LIMIT = 3,
	PB_MAPPING_FILE_OFFSET = 4,
	PB_MAPPING_FILENAME = 5,
	PB_MAPPING_BUILD_ID = 6,
	PB_MAPPING_HAS_FUNCTIONS = 7,
	PB_MAPPING_HAS_FILENAMES = 8,
	PB_MAPPING_HAS_LINE_NUMBERS = 9,
	PB_MAPPING_HAS_INLINE_FRAMES = 10,
};

enum pb_location {
	PB_LOCATION_ID = 1,
	PB_LOCATION_MAPPING_ID = 2,
	PB_LOCATION_ADDRESS = 3,
	PB_LOCATION_LINE = 4,
};

enum pb_line { PB_LINE_FUNCTION_ID = 1, PB_LINE_LINE = 2 };

enum pb_function {
	PB_FUNCTION_ID = 1,
	PB_FUNCTION_NAME = 2,
	PB_FUNCTION_SYSTEM_NAME = 3,
	PB_FUNCTION_FILENAME = 4,
	PB_FUNCTION_START_LINE = 5,
};

enum pb_gs_meta {
	PB_META_VERSION = 1,
	PB_META_FREQUENCY_HZ = 2,
	PB_META_LOST_SAMPLES = 3,
	PB_META_PROCESS = 4,
	PB_META_NOTE = 5,
	PB_META_LOCATION_KIND = 6,
	PB_META_STEP = 7,
};

enum pb_gs_step {
	PB_STEP_PID = 1,
	PB_STEP_TID = 2,
	PB_STEP_NUMBER = 3,
	PB_STEP_BACKWARDS = 4,
	PB_STEP_BY_OPTIMIZER = 5,
	PB_STEP_MARK_NS = 6,
	PB_STEP_WALL_NS = 7,
	PB_STEP_START_NS = 8,
	PB_STEP_END_NS = 9,
	PB_STEP_PHASE_NS = 10,
};

enum pb_gs_process {
	PB_PROCESS_PID = 1,
	PB_PROCESS_PPID = 2,
	PB_PROCESS_COMM = 3,
	PB_PROCESS_ROLE = 4,
	PB_PROCESS_PYTHON = 5,
	PB_PROCESS_GPU = 6,
	PB_PROCESS_CPU_SAMPLES = 7,
	PB_PROCESS_EXITED = 8,
	PB_PROCESS_NS_PID = 9,
};

/* GsMeta.version written. */
#define PB_META_VERSION_1 1

/* Process root frames (profile.process_frames): the writer adds a Location
 * and Function named PROC_FRAME_PREFIX "ROLE]" per role; the reader drops
 * them again. */
#define PROC_FRAME_PREFIX "[process "

#endif
