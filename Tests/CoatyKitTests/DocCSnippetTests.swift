import CoatyKit
import CoatyLocalBroker
import CoatyRecording
import CoatySQLite
import Foundation
import Testing

// The first ```swift block of these DocC catalogs, compiled: each stands between its markers below
// (the test checks they agree line by line, `import` lines aside, which this file has once at its
// top), wrapped in a function by the lines marked `wrapper`.

// DocC snippet CoatyMQTTTypes begins
func mqttTypesExample() throws -> (Bool, MQTTMessage) {  // wrapper
let filter = try MQTTTopicFilter("sensors/+/temperature")
let matched = filter.matches("sensors/kitchen/temperature")  // true
let message = MQTTMessage(topic: "sensors/kitchen/temperature", payload: Array("21.5".utf8))
return (matched, message)  // wrapper
}  // wrapper
// DocC snippet CoatyMQTTTypes ends

// DocC snippet CoatyMQTTTransport begins
func mqttTransportExample() async throws {  // wrapper
let identity = Identity(name: "Light agent")
let transport = try MQTTTransport(url: "mqtt://127.0.0.1:1883", identityId: identity.objectId)
let manager = try CommunicationManager(transport: transport, identity: identity)
try await manager.start()
}  // wrapper
// DocC snippet CoatyMQTTTransport ends

// DocC snippet CoatyRecording begins
func recordingExample(manager: CommunicationManager) async throws {  // wrapper
let database = try SQLiteDatabase(path: "coaty.sqlite")
let recorder = CoatyRecorder(manager: manager, connection: database.makeConnection())
try await recorder.run()
}  // wrapper
// DocC snippet CoatyRecording ends

// DocC snippet CoatyLocalBroker begins
func localBrokerExample() async throws {  // wrapper
let broker = try await MosquittoBroker.start()
defer { Task { await broker.stop() } }
print(broker.url)  // mqtt://127.0.0.1:<port>
}  // wrapper
// DocC snippet CoatyLocalBroker ends

@Suite("DocC snippets")
struct DocCSnippetTests {
    /// The lines between `begin` and `end`, without wrapper and `import` lines, trailing spaces
    /// and blank lines.
    static func lines(of text: some StringProtocol, from begin: String?, to end: String) -> [String] {
        ReadmeSnippetTests.lines(of: text, from: begin, to: end).filter { !$0.hasPrefix("import ") }
    }

    @Test("Each catalog's first Swift example is the code compiled in this file", arguments: [
        "CoatyMQTTTypes", "CoatyMQTTTransport", "CoatyRecording", "CoatyLocalBroker",
    ])
    func exampleCompiles(module: String) throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let article = root.appendingPathComponent("Sources/\(module)/Documentation.docc/\(module).md")
        let text = try String(contentsOf: article, encoding: .utf8)
        let opening = try #require(text.range(of: "```swift\n"), "\(module).md has no Swift block")
        let example = Self.lines(of: text[opening.upperBound...], from: nil, to: "```")
        let source = try String(contentsOf: here, encoding: .utf8)
        let marker = "// DocC snippet \(module) "
        let compiled = Self.lines(of: source, from: marker + "begins", to: marker + "ends")
        #expect(!example.isEmpty)
        #expect(example == compiled, "\(module).md's example differs from DocCSnippetTests.swift: update both")
    }
}
