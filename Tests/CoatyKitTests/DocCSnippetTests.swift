import AgentProcessTestSupport
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
    @Test("Each catalog's first Swift example is the code compiled in this file", arguments: [
        "CoatyMQTTTypes", "CoatyMQTTTransport", "CoatyRecording", "CoatyLocalBroker",
    ])
    func exampleCompiles(module: String) throws {
        let (article, compiled) = try catalogExample(of: module, compiledIn: #filePath)
        #expect(!article.isEmpty)
        #expect(article == compiled, "\(module).md's example differs from DocCSnippetTests.swift: update both")
    }
}
