import BenchmarkSupport
import CoatyKit
import CoatyRecording
import CoatySQLite
import Foundation

/// `recorder HOST PORT DB [--answers N]`: what `coaty record --db DB` runs — a CoatyRecorder on a SQLite file, its
/// manager on Coaty's defaults — as a role that can run under callgrind (the CLI's async main cannot: valgrind 3.19
/// dies in libdispatch's signal thread). Prints `ready` once subscribed; with `--answers N` it stops after N requests
/// answered, Queries and Discovers (callgrind writes its counts at exit). `Benchmarks/CoatyJS/query_instructions.py` drives it.
func runRecorderRole(_ args: [String]) async throws {
    let manager = try CommunicationManager.mqtt(url: "mqtt://\(args[0]):\(args[1])", identity: Identity(name: "recorder"))
    let recorder = CoatyRecorder(manager: manager, connection: try SQLiteDatabase(path: args[2]).makeConnection())
    let run = Task { try await recorder.run() }
    try await manager.start()
    await recorder.ready()
    emit("ready")
    let limit = args.firstIndex(of: "--answers").flatMap { Int(args[$0 + 1]) }
    // The answers are counted from the recorder's statistics, polled: `coaty record` without `--verbose` has no
    // listener on its events, and one here would add its stream's cost (some 15 000 instructions) to each request.
    while !run.isCancelled {
        let statistics = recorder.statistics
        if let limit, statistics.answeredQueries + statistics.answeredDiscovers >= limit { break }
        try await Task.sleep(for: .milliseconds(20))
    }
    recorder.stop()
    _ = try? await run.value
    await manager.stop()
}
