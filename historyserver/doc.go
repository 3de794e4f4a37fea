// Package historyserver keeps finished jobs readable after their cluster
// is gone, as Flink's HistoryServer does.
//
// A JobManager with jobmanager.archive.fs.dir set archives every job that
// ends globally terminal (FINISHED, FAILED, CANCELED): an Archiver asks the
// JobManager's own REST handler for the job's JSON (its overview, details,
// vertices, exceptions, checkpoints and checkpoint config, execution
// result and a job config) and writes it, in Flink's format, as one file
// named after the job ID:
//
//	{"archive": [{"path": "/jobs/<id>", "json": "<the response body>"}, ...]}
//
// `gofl historyserver` (a Server) scans historyserver.archive.fs.dir every
// historyserver.archive.fs.refresh-interval and serves those paths, plus
// /jobs/overview, /jobs and /overview merged over every archived job and
// /config, on historyserver.web.port; other paths answer 404 in Flink's
// error shape. Options.UI mounts the web dashboard at /.
package historyserver
