import CoatySQLite
import CoatyRecording
import CoatyStore
import Foundation
import Testing

/// The backends every contract test runs against.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inMemory
    case sqlite

    var testDescription: String { rawValue }

    /// A fresh, empty database's connection (SQLite: a real file in a new temporary directory).
    func makeConnection() async throws -> any ConnectionType {
        switch self {
        case .inMemory: InMemoryDatabase().makeConnection()
        case .sqlite: try SQLiteDatabase(path: TemporaryDirectory().file("store.sqlite")).makeConnection()
        }
    }
}

/// A new directory under the system's temporary directory.
struct TemporaryDirectory {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-store-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }
}
