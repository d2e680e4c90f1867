import CoatyCore
import CoatyTesting
import Foundation
import Testing

/// Writes `text` to a fresh temporary file and returns its path.
private func temporaryFile(_ text: String) throws -> String {
    let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("coaty-config-\(CoatyUUID()).json").path
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

private let identityId = CoatyUUID()

private let fileText = """
    {
      "common": { "agentIdentity": { "name": "From file", "objectId": "\(identityId)" } },
      "communication": {
        "brokerUrl": "mqtt://file-broker:1884",
        "namespace": "file-ns",
        "shouldEnableCrossNamespacing": false,
        "observerBufferLimit": 50
      },
      "controllers": { "LightController": { "room": "kitchen" } },
      "databases": { "store": { "adapter": "SqLiteNodeAdapter", "connectionString": "store.db" } }
    }
    """

@Suite("AgentConfiguration")
struct AgentConfigurationTests {
    @Test("defaults without file or environment")
    func defaults() throws {
        let configuration = try AgentConfiguration.load(environment: [:])
        #expect(configuration == AgentConfiguration())
        #expect(configuration.brokerURL == "mqtt://127.0.0.1:1883")
        #expect(configuration.namespace == "-")
        #expect(!configuration.shouldEnableCrossNamespacing)
    }

    @Test("the file overrides the defaults, the environment overrides the file")
    func precedence() throws {
        let path = try temporaryFile(fileText)
        defer { try? FileManager.default.removeItem(atPath: path) }

        let fromFile = try AgentConfiguration.load(file: path, environment: [:])
        #expect(fromFile.name == "From file")
        #expect(fromFile.identityId == identityId)
        #expect(fromFile.brokerURL == "mqtt://file-broker:1884")
        #expect(fromFile.namespace == "file-ns")
        #expect(fromFile.observerBufferLimit == 50)
        #expect(fromFile.deferredPublicationLimit == nil)
        #expect(fromFile.controllers["LightController"] == ["room": "kitchen"])

        let environment = [
            "COATY_CONFIG": path,
            "COATY_BROKER": "mqtts://env-broker:8883",
            "COATY_NAMESPACE": "env-ns",
            "COATY_NAME": "From environment",
            "COATY_CROSS_NAMESPACE": "yes",
        ]
        let fromEnvironment = try AgentConfiguration.load(environment: environment)
        #expect(fromEnvironment.name == "From environment")
        #expect(fromEnvironment.identityId == identityId)
        #expect(fromEnvironment.brokerURL == "mqtts://env-broker:8883")
        #expect(fromEnvironment.namespace == "env-ns")
        #expect(fromEnvironment.shouldEnableCrossNamespacing)
        #expect(fromEnvironment.observerBufferLimit == 50)
    }

    @Test("QoS 1 is opt-in: communication.qos in the file, COATY_QOS in the environment")
    func qualityOfService() throws {
        let path = try temporaryFile(#"{"communication": {"qos": 1}}"#)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fromFile = try AgentConfiguration.load(file: path, environment: [:])
        #expect(fromFile.qos == 1)
        #expect(fromFile.communicationOptions.qos == .atLeastOnce)
        #expect(fromFile.json.objectValue?["communication"]?.objectValue?["qos"] == 1)
        let overridden = try AgentConfiguration.load(file: path, environment: ["COATY_QOS": "0"])
        #expect(overridden.communicationOptions.qos == .atMostOnce)
        #expect(try AgentConfiguration.load(environment: ["COATY_QOS": "1"]).communicationOptions.qos == .atLeastOnce)
        #expect(AgentConfiguration().communicationOptions.qos == .atMostOnce)
    }

    @Test("the configuration maps onto the identity and the communication manager options")
    func mapping() throws {
        let broker = InProcessBroker()
        var configuration = try AgentConfiguration(json: JSONValue(parsing: fileText))
        configuration.shouldEnableCrossNamespacing = true
        configuration.deferredPublicationLimit = 7
        let identity = configuration.makeIdentity()
        let manager = try configuration.makeCommunicationManager(
            transport: broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId))
        )
        #expect(manager.identity.objectId == identityId)
        #expect(manager.identity.name == "From file")
        #expect(manager.options.namespace == "file-ns")
        #expect(manager.options.crossNamespacing)
        #expect(manager.options.deferredPublicationLimit == 7)
        #expect(manager.options.observerBufferLimit == 50)
        #expect(
            AgentConfiguration(name: "fresh").makeIdentity().objectId != AgentConfiguration().makeIdentity().objectId
        )
    }

    @Test("Codable round trip in Coaty JS's layout")
    func codableRoundTrip() throws {
        let configuration = try AgentConfiguration(json: JSONValue(parsing: fileText))
        let encoded = try JSONValueEncoder().encode(configuration)
        #expect(encoded["communication"]?["brokerUrl"] == "mqtt://file-broker:1884")
        #expect(encoded["common"]?["agentIdentity"]?["objectId"] == .string(identityId.uuidString))
        #expect(try JSONValueDecoder().decode(AgentConfiguration.self, from: encoded) == configuration)
    }

    @Test(
        "a bad field is named in the error",
        arguments: [
            (#"[]"#, nil),
            (#"{"communication": {"namespace": "a/b"}}"#, "communication.namespace"),
            (#"{"communication": {"namespace": 3}}"#, "communication.namespace"),
            (#"{"communication": {"brokerUrl": "http://broker"}}"#, "communication.brokerUrl"),
            (#"{"communication": {"brokerUrl": "mqtt://broker:99999"}}"#, "communication.brokerUrl"),
            (#"{"communication": {"brokerUrl": "mqtt://"}}"#, "communication.brokerUrl"),
            (
                #"{"communication": {"shouldEnableCrossNamespacing": "yes"}}"#,
                "communication.shouldEnableCrossNamespacing"
            ),
            (#"{"communication": {"observerBufferLimit": -1}}"#, "communication.observerBufferLimit"),
            (#"{"communication": {"qos": 2}}"#, "communication.qos"),
            (#"{"communication": []}"#, "communication"),
            (#"{"common": {"agentIdentity": {"objectId": "not-a-uuid"}}}"#, "common.agentIdentity.objectId"),
            (#"{"common": {"agentIdentity": {"name": false}}}"#, "common.agentIdentity.name"),
            (#"{"controllers": {"LightController": 1}}"#, "controllers.LightController"),
        ] as [(String, String?)]
    )
    func badField(json: String, field: String?) throws {
        let path = try temporaryFile(json)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = try #require(throws: AgentConfigurationError.self) {
            try AgentConfiguration.load(file: path, environment: [:])
        }
        #expect(error.field == field)
        #expect(error.source == path)
        #expect(error.description.hasPrefix(path + ": " + (field.map { $0 + ": " } ?? "")))
    }

    @Test(
        "a bad environment variable is named in the error",
        arguments: [
            ("COATY_CROSS_NAMESPACE", "maybe"),
            ("COATY_QOS", "2"),
            ("COATY_QOS", "one"),
            ("COATY_NAMESPACE", "#"),
            ("COATY_BROKER", "tcp://broker"),
            ("COATY_IDENTITY_ID", "123"),
        ]
    )
    func badEnvironment(variable: String, value: String) throws {
        let error = try #require(throws: AgentConfigurationError.self) {
            try AgentConfiguration.load(environment: [variable: value])
        }
        #expect(error.field == variable)
        #expect(error.source == nil)
        #expect(error.description.contains(value))
    }

    @Test("an unreadable or malformed file says so")
    func badFile() throws {
        let missing = "/nonexistent/coaty-\(CoatyUUID()).json"
        let unreadable = try #require(throws: AgentConfigurationError.self) {
            try AgentConfiguration.load(file: missing, environment: [:])
        }
        #expect(unreadable.source == missing && unreadable.field == nil)
        let path = try temporaryFile("{ not json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let malformed = try #require(throws: AgentConfigurationError.self) {
            try AgentConfiguration.load(file: path, environment: [:])
        }
        #expect(malformed.reason.contains("not valid JSON"))
    }
}
