import CoatySync
import Foundation
import GRDB
import GRDBSQLite

/// Checkpoints a database's write-ahead log on a thread of its own instead of inside the writer's
/// commits.
///
/// SQLite's automatic checkpoint runs in the commit that grows the WAL past its limit: the writer
/// then copies the whole WAL into the database file (40 MB at our limit of 10 000 pages) and waits
/// for two fsyncs before it writes on (a recorder ingesting a burst stores 12 % more objects per
/// second without that stall, measured with this hook on and off). This replaces it (by the writer connection's WAL hook, which turns the automatic
/// checkpoint off) with a `PASSIVE` checkpoint on a short-lived connection of its own, started
/// when the WAL reaches the limit: SQLite lets the writer append to the WAL meanwhile. What that
/// copied is not copied again: once the WAL frames it left are few (at most half the limit), the
/// writer checkpoints them itself in its next commit, cheaply, and the WAL then starts again from
/// its beginning (SQLite restarts it only once every frame is in the database file), so it stays
/// bounded as with the automatic checkpoint. When the checkpoint connection cannot be opened, the
/// writer checkpoints as SQLite would.
final class SQLiteCheckpointer: Sendable {
    private struct State {
        /// A background checkpoint runs.
        var running = false
        /// The WAL frames the last background checkpoint left copied, until the writer finished
        /// the rest (or the WAL started again).
        var copied: Int32?
        /// The checkpoint connection could not be opened: the writer checkpoints itself.
        var failed = false
        /// Background checkpoints completed (for tests).
        var completed = 0
    }

    /// What the writer does after a commit.
    enum Action: Equatable {
        case none
        case checkpointHere
        case checkpointInBackground
    }

    /// The database file.
    let path: String
    /// The WAL size, in frames (pages), at which a checkpoint starts.
    let limit: Int32
    private let state = CoatyMutex(State())

    /// - Parameters:
    ///   - path: the database file.
    ///   - limit: the WAL size in pages at which a checkpoint starts.
    init(path: String, limit: Int) {
        self.path = path
        self.limit = Int32(clamping: max(1, limit))
    }

    /// The background checkpoints completed so far.
    var completedCount: Int { state.withLock { $0.completed } }

    /// Installs the WAL hook on a writing connection (`db` must keep the checkpointer alive: its
    /// configuration's `prepareDatabase` closure captures it).
    func install(on db: Database) {
        sqlite3_wal_hook(db.sqliteConnection, walHook, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Decides what the writer does after a commit left `frames` frames in the WAL.
    func committed(walFrames frames: Int32) -> Action {
        state.withLock { state in
            // A WAL smaller than what was copied started again from its beginning.
            if let copied = state.copied, frames < copied { state.copied = nil }
            guard frames >= limit else { return .none }
            if state.failed { return .checkpointHere }
            // The checkpoint lock is the background's: a checkpoint here would only fail.
            if state.running { return .none }
            // Few frames left to copy, or a WAL that outgrew the checkpoints (a writer faster than
            // they are): the writer copies the rest, and the WAL starts again.
            if let copied = state.copied, frames - copied <= limit / 2 || frames >= 4 * limit {
                state.copied = nil
                return .checkpointHere
            }
            state.running = true
            state.copied = nil
            return .checkpointInBackground
        }
    }

    /// Starts a background checkpoint on a thread of its own.
    func startBackground() {
        Thread.detachNewThread { [self] in finished(copied: Self.checkpoint(path: path)) }
    }

    /// Records the end of a background checkpoint: the WAL frames it left copied, or `nil` when
    /// its connection could not be opened (from then on the writer checkpoints itself).
    func finished(copied: Int32?) {
        state.withLock { state in
            state.running = false
            state.completed += 1
            switch copied {
            case .some(let frames): state.copied = frames
            case .none: state.failed = true
            }
        }
    }

    /// A `PASSIVE` checkpoint on a connection of its own: the frames it left copied (0 when it
    /// could not run), or `nil` when the connection could not be opened.
    private static func checkpoint(path: String) -> Int32? {
        var connection: OpaquePointer?
        defer { sqlite3_close_v2(connection) }
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { return nil }
        // As the pool's connections: a checkpoint syncs the WAL, then the database file.
        sqlite3_exec(connection, "PRAGMA synchronous = NORMAL", nil, nil, nil)
        var log: Int32 = 0
        var copied: Int32 = 0
        guard sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied) == SQLITE_OK else {
            return 0
        }
        return max(0, copied)
    }
}

/// The writer connection's WAL hook: after each commit, with the WAL's size in frames. A C
/// function (no captures); the checkpointer comes as the context.
private func walHook(
    context: UnsafeMutableRawPointer?,
    db: OpaquePointer?,
    name: UnsafePointer<CChar>?,
    frames: Int32
) -> Int32 {
    guard let context else { return SQLITE_OK }
    let checkpointer = Unmanaged<SQLiteCheckpointer>.fromOpaque(context).takeUnretainedValue()
    switch checkpointer.committed(walFrames: frames) {
    case .none:
        break
    case .checkpointHere:
        // What SQLite's automatic checkpoint does.
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    case .checkpointInBackground:
        checkpointer.startBackground()
    }
    return SQLITE_OK
}
