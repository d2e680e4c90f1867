import AgentProcessTestSupport
import CoatyDiscovery
import CoatyKit
import CoatyOperator
import CoatyPostgres
import CoatyRecording
import CoatySQLite
import CoatySensorThings
import CoatyStore
import CoatySync
import CoatyTesting
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Testing
import UnixSignals

// The first ```swift block of the other DocC catalogs (CoatyKitTests' DocCSnippetTests has the MQTT wing's, the
// recorder's and the local broker's; CoatyViewTests has the viewer's), compiled: each stands between its markers
// below, and the test checks they agree with the article line by line (import lines and the lines marked `wrapper`
// aside: the wrappers give an example the names it takes from its surroundings, such as `logger`).

// DocC snippet CoatyKit begins
enum CoatyKitExample {  // wrapper
struct Light: CoatyObject {
    static let objectType = "com.example.Light"
    var objectId = CoatyUUID()
    var name: String
    var isOn: Bool
}
}  // wrapper
// DocC snippet CoatyKit ends

// DocC snippet CoatyModel begins
enum CoatyModelExample {  // wrapper
struct Light: CoatyObject, Hashable {
    static let objectType = "com.example.Light"
    var objectId = CoatyUUID()
    var name: String
    var isOn: Bool
    var luminance: Double
}
}  // wrapper
// DocC snippet CoatyModel ends

// DocC snippet CoatyMQTT begins
func mqttClientExample(logger: Logger) async throws {  // wrapper
var configuration = try MQTTConfiguration(url: "mqtts://broker.example:8883", clientId: "sensor-7")
configuration.tls = MQTTTLSConfiguration(caFile: "/etc/coaty/ca.pem")
configuration.will = MQTTMessage(topic: "sensors/7/status", payload: Array("offline".utf8), retain: true)

let client = MQTTClient(configuration: configuration, logger: logger)
try await client.connect()                       // throws MQTTError: brokerUnreachable, tlsVerificationFailed, …
try await client.subscribe("sensors/+/temperature")
try await client.publish("sensors/7/temperature", payload: Array("21.5".utf8))

for await message in client.messages {
    print(message.topic, String(decoding: message.payload, as: UTF8.self))
}
}  // wrapper
// DocC snippet CoatyMQTT ends

// DocC snippet CoatyOperator begins
func operatorExample(logger: Logger) async throws {  // wrapper
let registry = PrometheusCollectorRegistry()
let metrics = PrometheusMetricsFactory(registry: registry)
let manager = try CommunicationManager.mqtt(url: "mqtt://127.0.0.1:1883", metricsFactory: metrics)
let database = try SQLiteDatabase(path: "objects.sqlite")
let recorder = CoatyRecorder(manager: manager, connection: database.makeConnection(), metricsFactory: metrics)
let endpoint = OperatorEndpoint(configuration: .init(port: 9464), registry: registry) { .of(recorder) }
// A group stops its services in reverse order: listed first, the endpoint answers until the end.
let group = ServiceGroup(services: [endpoint, recorder, manager], gracefulShutdownSignals: [.sigterm], logger: logger)
try await group.run()
}  // wrapper
// DocC snippet CoatyOperator ends

// DocC snippet CoatyPostgres begins
func postgresExample() async throws {  // wrapper
try await PostgresDatabase.withDatabase(url: "postgres://coaty@localhost:5432/coaty") { database in
    let connection = try await database.makeConnection()
    let objects = AnyRepository(StoreRepository(connection: connection, coatyObjects: AnyCoatyObject.self))
    let lights = try await objects.fetch(FetchOptions(filter: .where("objectType", .equals("com.example.Light"))))
    _ = lights  // wrapper
}
}  // wrapper
// DocC snippet CoatyPostgres ends

// DocC snippet CoatySensorThings begins
func sensorThingsExample() throws {  // wrapper
let manager = try CommunicationManager.mqtt(
    url: "mqtt://127.0.0.1:1883",
    identity: Identity(name: "Boiler agent"),
    registry: CoatyObjectRegistry(SensorThingsTypes.all)
)
_ = manager  // wrapper
}  // wrapper
// DocC snippet CoatySensorThings ends

// DocC snippet CoatyStore begins
enum CoatyStoreExample {  // wrapper
typealias Light = CoatyModelExample.Light  // wrapper
struct Setting: Persistable {
    static let collection = "settings"
    var id: String
    var value: Int
}

static func run(connection: some ConnectionType, lights: [Light], receipt: ReceiptMetadata) async throws {  // wrapper
try await connection.write { tx in
    try await Setting(id: "volume", value: 7).write(to: tx)
    try await lights.write(to: tx, metadata: receipt)    // any sequence of Coaty objects
}
let (volume, bright) = try await connection.read { tx in
    (
        try await Setting.read(tx).byKey("volume"),
        try await Light.read(tx).matching(.where("luminance", .greaterThan(0.5)).orderBy("name"))
    )
}
_ = (volume, bright)  // wrapper
}  // wrapper
}  // wrapper
// DocC snippet CoatyStore ends

// DocC snippet CoatySync begins
enum CoatySyncExample {  // wrapper
final class Counter: Sendable {
    private let count = CoatyMutex(0)
    func increment() -> Int { count.withLock { $0 += 1; return $0 } }
}
}  // wrapper
// DocC snippet CoatySync ends

// DocC snippet CoatyTesting begins
@Test func observerSeesAdvertise() async throws {
    let broker = InProcessBroker()
    let observer = try CommunicationManager(
        transport: broker.makeTransport(clientId: "observer"), identity: Identity(name: "observer"))
    let publisher = try CommunicationManager(
        transport: broker.makeTransport(clientId: "publisher"), identity: Identity(name: "publisher"))
    let tasks = try observer.observeAdvertise(coreType: .task)
    try await observer.start()
    try await publisher.start()
    await tasks.subscribed()

    let task = CoatyTask(
        name: "Water the plants", status: .pending, creatorId: publisher.identity.objectId, creationTimestamp: 0)
    try await publisher.publishAdvertise(task)
    for await event in tasks {
        #expect(event.object.objectId == task.objectId)
        break
    }
    await publisher.stop()
    await observer.stop()
}
// DocC snippet CoatyTesting ends

// DocC snippet CoatyDiscovery begins
func discoveryExample(logger: Logger, runTheBroker: () async throws -> Void) async throws {  // wrapper
let discovery = BrokerDiscovery(logger: logger)
try await discovery.withPublishedBroker(port: 1883, webSocketPort: 9001) { registration in
    logger.info("advertised as \(registration.name)")
    try await runTheBroker()
}

// or, in a ServiceGroup: withdrawn at graceful shutdown
let advertisement = BrokerAdvertisement(port: 1883, discovery: discovery)
_ = advertisement  // wrapper
}  // wrapper
// DocC snippet CoatyDiscovery ends

@Suite("DocC catalog examples")
struct CatalogExampleTests {
    @Test(
        "each catalog's first Swift example is the code compiled in this file",
        arguments: [
            "CoatyKit", "CoatyModel", "CoatyMQTT", "CoatyOperator", "CoatyPostgres", "CoatySensorThings", "CoatyStore",
            "CoatySync", "CoatyTesting", "CoatyDiscovery",
        ]
    )
    func exampleCompiles(module: String) throws {
        let (article, compiled) = try catalogExample(of: module, compiledIn: #filePath)
        #expect(!article.isEmpty)
        #expect(article == compiled, "\(module).md's example differs from CatalogExampleTests.swift: update both")
    }
}
