/* SPDX-License-Identifier: MIT */
/* gpusample: sampling profiler for GPU training jobs. */
#include <stdio.h>

#include "cli/options.h"
#include "cli/cli.h"
#include "cli/progress.h"

int main(int argc, char **argv)
{
	struct gs_cli o;
	int rc = gs_options_parse(&o, argc, argv);

	if (rc == 1)
		return 0;
	if (rc < 0)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (o.report_files)
		return gs_report_files(o.report_files, o.n_report_files, o.report_html);
	if (o.check)
		return gs_check_bpf();
	if (o.dump)
		return gs_dump_main(&o.run);
	if (o.merge_out)
		return gs_merge_files(o.merge_out, o.merge_in, o.n_merge_in);
	return gs_session_run(&o.run, gs_progress_show);
}
