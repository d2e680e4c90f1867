import CoatyCore
import Foundation
import Testing

/// A temporary directory with readable stand-ins for PEM files (the configuration only checks that
/// they can be read; the MQTT tests check real certificates).
private struct PEMFiles {
    let directory: String
    var ca: String { directory + "/ca.pem" }
    var cert: String { directory + "/client.pem" }
    var key: String { directory + "/client.key" }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-pem-\(CoatyUUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for path in [ca, cert, key] {
            try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: path))
        }
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// `text` with `$CA`, `$CERT` and `$KEY` replaced by the paths.
    func substitute(_ text: String) -> String {
        text.replacingOccurrences(of: "$CA", with: ca).replacingOccurrences(of: "$CERT", with: cert)
            .replacingOccurrences(of: "$KEY", with: key)
    }
}

/// Writes `text` to a fresh temporary file and returns its path.
private func configurationFile(_ text: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-config-\(CoatyUUID()).json").path
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

private let agentInfoJSON = """
    {"packageInfo": {"name": "light-agent", "version": "1.2.0", "repository": "git"},
     "buildInfo": {"buildDate": "2024-05-01T10:00:00.000Z", "buildMode": "production"},
     "configInfo": {"serviceHost": "10.0.0.7"}}
    """

private let fullFile = """
    {
      "common": {
        "agentIdentity": { "name": "Light agent" },
        "agentInfo": \(agentInfoJSON),
        "extra": { "site": "plant 4" }
      },
      "communication": {
        "brokerUrl": "mqtts://broker.example:8883",
        "shouldAutoStart": true,
        "mqttClientOptions": {
          "username": "light", "password": "s3cret", "keepalive": 30, "qos": 1,
          "ca": "$CA", "cert": "$CERT", "key": "$KEY", "rejectUnauthorized": false,
          "will": { "topic": "ignored", "payload": "ignored" }
        }
      },
      "controllers": { "LightController": { "room": "kitchen" } },
      "databases": {
        "store": { "adapter": "PostgresAdapter", "connectionString": "postgres://coaty@db/coaty",
                   "connectionOptions": { "max": 4 } },
        "local": { "adapter": "SqLiteNodeAdapter", "connectionString": "/tmp/local.db" },
        "cache": { "adapter": "InMemoryAdapter" },
        "custom": { "adapter": "MyAdapter" }
      }
    }
    """

@Suite("AgentConfiguration: connection, agentInfo and databases")
struct AgentConfigurationConnectionTests {
    @Test(
        "Coaty JS's layout with mqttClientOptions: credentials, keep-alive, QoS, TLS files, agentInfo, extra, databases"
    )
    func fullFileLayout() throws {
        let pem = try PEMFiles()
        defer { pem.remove() }
        let path = try configurationFile(pem.substitute(fullFile))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try AgentConfiguration.load(file: path, environment: [:])

        #expect(configuration.username == "light")
        #expect(configuration.password == "s3cret")
        #expect(configuration.keepAlive == 30)
        #expect(configuration.qos == 1)
        #expect(configuration.caFile == pem.ca)
        #expect(configuration.certificateFile == pem.cert)
        #expect(configuration.privateKeyFile == pem.key)
        #expect(!configuration.verifiesServer)
        let info = try #require(configuration.agentInfo)
        #expect(info.packageInfo.name == "light-agent")
        #expect(info.packageInfo.version == "1.2.0")
        #expect(info.packageInfo.custom == ["repository": "git"])
        #expect(info.buildInfo.buildDate == "2024-05-01T10:00:00.000Z")
        #expect(info.buildInfo.buildMode == "production")
        #expect(info.configInfo.serviceHost == "10.0.0.7")
        #expect(configuration.extra == ["site": "plant 4"])
        #expect(configuration.databases["store"]?.backend == .postgres)
        #expect(configuration.databases["store"]?.connectionString == "postgres://coaty@db/coaty")
        #expect(configuration.databases["store"]?.connectionOptions == ["max": 4])
        #expect(configuration.databases["local"]?.backend == .sqlite)
        #expect(configuration.databases["local"]?.connectionString == "/tmp/local.db")
        #expect(configuration.databases["cache"]?.backend == .inMemory)
        #expect(configuration.databases["custom"]?.backend == .other("MyAdapter"))
        #expect(configuration.databases.count == 4)
        try configuration.validate()
    }

    @Test("Coaty JS 2.1's binding.options layout, tlsOptions inside it, and binding options win")
    func bindingOptionsLayout() throws {
        let pem = try PEMFiles()
        defer { pem.remove() }
        let json = pem.substitute(
            """
            {"communication": {
              "brokerUrl": "mqtt://deprecated:1883", "namespace": "old",
              "mqttClientOptions": {"username": "old", "keepalive": 10},
              "binding": {"options": {
                "brokerUrl": "mqtts://binding:8883", "namespace": "new", "shouldEnableCrossNamespacing": true,
                "username": "new", "password": "pw", "keepalive": 0,
                "tlsOptions": {"ca": "$CA", "cert": "$CERT", "key": "$KEY"}}}}}
            """
        )
        let configuration = try AgentConfiguration(json: JSONValue(parsing: json))
        #expect(configuration.brokerURL == "mqtts://binding:8883")
        #expect(configuration.namespace == "new")
        #expect(configuration.shouldEnableCrossNamespacing)
        #expect(configuration.username == "new")
        #expect(configuration.password == "pw")
        #expect(configuration.keepAlive == 0)
        #expect(configuration.caFile == pem.ca)
        #expect(configuration.certificateFile == pem.cert)
        #expect(configuration.privateKeyFile == pem.key)
        #expect(configuration.verifiesServer)
    }

    @Test("every COATY_* connection, agentInfo and database variable overrides the file")
    func environmentVariables() throws {
        let pem = try PEMFiles()
        defer { pem.remove() }
        let path = try configurationFile(pem.substitute(fullFile))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let environment = [
            "COATY_CONFIG": path,
            "COATY_USERNAME": "env-user",
            "COATY_PASSWORD": "env-password",
            "COATY_KEEPALIVE": "45",
            "COATY_CA_FILE": pem.key,
            "COATY_CERT_FILE": pem.ca,
            "COATY_KEY_FILE": pem.cert,
            "COATY_TLS_VERIFY": "true",
            "COATY_ENV": "staging",
            "COATY_SERVICE_HOST": "agent.local",
            "COATY_DATABASE_store": "sqlite:/var/lib/store.db",
            "COATY_DATABASE_pg": "postgresql://u@h/db",
            "COATY_DATABASE_mem": "memory:",
        ]
        let configuration = try AgentConfiguration.load(environment: environment)
        #expect(configuration.username == "env-user")
        #expect(configuration.password == "env-password")
        #expect(configuration.keepAlive == 45)
        #expect(configuration.caFile == pem.key)
        #expect(configuration.certificateFile == pem.ca)
        #expect(configuration.privateKeyFile == pem.cert)
        #expect(configuration.verifiesServer)
        #expect(configuration.agentInfo?.buildInfo.buildMode == "staging")
        #expect(configuration.agentInfo?.configInfo.serviceHost == "agent.local")
        #expect(configuration.agentInfo?.packageInfo.name == "light-agent", "the file's other members stay")
        #expect(
            configuration.databases["store"] == DatabaseOptions(backend: .sqlite, connectionString: "/var/lib/store.db")
        )
        #expect(
            configuration.databases["pg"]
                == DatabaseOptions(backend: .postgres, connectionString: "postgresql://u@h/db")
        )
        #expect(configuration.databases["mem"] == DatabaseOptions(backend: .inMemory))
        #expect(configuration.databases["local"]?.backend == .sqlite, "the file's other databases stay")

        let onlyEnvironment = try AgentConfiguration.load(environment: [
            "COATY_BROKER": "mqtts://b:8883", "COATY_CA_FILE": pem.ca, "COATY_TLS_VERIFY": "no", "COATY_ENV": "testing",
        ])
        #expect(onlyEnvironment.caFile == pem.ca && onlyEnvironment.certificateFile == nil)
        #expect(!onlyEnvironment.verifiesServer)
        #expect(onlyEnvironment.agentInfo?.buildInfo.buildMode == "testing")
        #expect(onlyEnvironment.agentInfo?.configInfo.serviceHost == "")
    }

    @Test(
        "a bad connection, agentInfo or database field is named in the error with the file",
        arguments: [
            (#"{"communication": {"mqttClientOptions": []}}"#, "communication.mqttClientOptions"),
            (#"{"communication": {"mqttClientOptions": {"username": 1}}}"#, "communication.mqttClientOptions.username"),
            (
                #"{"communication": {"mqttClientOptions": {"password": false}}}"#,
                "communication.mqttClientOptions.password"
            ),
            (
                #"{"communication": {"mqttClientOptions": {"keepalive": 3}}}"#,
                "communication.mqttClientOptions.keepalive"
            ),
            (
                #"{"communication": {"mqttClientOptions": {"keepalive": -1}}}"#,
                "communication.mqttClientOptions.keepalive"
            ),
            (
                #"{"communication": {"mqttClientOptions": {"keepalive": 70000}}}"#,
                "communication.mqttClientOptions.keepalive"
            ),
            (
                #"{"communication": {"mqttClientOptions": {"keepalive": "60"}}}"#,
                "communication.mqttClientOptions.keepalive"
            ),
            (#"{"communication": {"mqttClientOptions": {"qos": 2}}}"#, "communication.mqttClientOptions.qos"),
            (
                #"{"communication": {"mqttClientOptions": {"ca": "/nonexistent/ca.pem"}}}"#,
                "communication.mqttClientOptions.ca"
            ),
            (
                #"{"communication": {"mqttClientOptions": {"ca": "-----BEGIN CERTIFICATE-----"}}}"#,
                "communication.mqttClientOptions.ca"
            ),
            (#"{"communication": {"mqttClientOptions": {"ca": 7}}}"#, "communication.mqttClientOptions.ca"),
            (#"{"communication": {"mqttClientOptions": {"cert": "$CERT"}}}"#, "communication.mqttClientOptions.key"),
            (#"{"communication": {"mqttClientOptions": {"key": "$KEY"}}}"#, "communication.mqttClientOptions.cert"),
            (
                #"{"communication": {"mqttClientOptions": {"rejectUnauthorized": "no"}}}"#,
                "communication.mqttClientOptions.rejectUnauthorized"
            ),
            (
                #"{"communication": {"mqttClientOptions": {"tlsOptions": 1}}}"#,
                "communication.mqttClientOptions.tlsOptions"
            ),
            (#"{"communication": {"binding": []}}"#, "communication.binding"),
            (#"{"communication": {"binding": {"options": 1}}}"#, "communication.binding.options"),
            (
                #"{"communication": {"binding": {"options": {"brokerUrl": "ws://x"}}}}"#,
                "communication.binding.options.brokerUrl"
            ),
            (
                #"{"communication": {"binding": {"options": {"namespace": "a+b"}}}}"#,
                "communication.binding.options.namespace"
            ),
            (
                #"{"communication": {"binding": {"options": {"tlsOptions": {"cert": "$CERT"}}}}}"#,
                "communication.binding.options.tlsOptions.key"
            ),
            (#"{"communication": {"mqttClientOptions": {"ca": "$CA"}}}"#, "communication.brokerUrl"),
            (#"{"common": {"agentInfo": 1}}"#, "common.agentInfo"),
            (#"{"common": {"agentInfo": {}}}"#, "common.agentInfo.packageInfo"),
            (#"{"common": {"agentInfo": {"packageInfo": {"version": "1"}}}}"#, "common.agentInfo.packageInfo.name"),
            (
                #"{"common": {"agentInfo": {"packageInfo": {"name": 1, "version": "1"}}}}"#,
                "common.agentInfo.packageInfo.name"
            ),
            (
                #"{"common": {"agentInfo": {"packageInfo": {"name": "a", "version": "1"}, "buildInfo": {"buildMode": "x"}}}}"#,
                "common.agentInfo.buildInfo.buildDate"
            ),
            (
                #"{"common": {"agentInfo": {"packageInfo": {"name": "a", "version": "1"}, "buildInfo": {"buildDate": "d", "buildMode": "x"}, "configInfo": []}}}"#,
                "common.agentInfo.configInfo"
            ),
            (#"{"common": {"extra": []}}"#, "common.extra"),
            (#"{"databases": []}"#, "databases"),
            (#"{"databases": {"db": "sqlite"}}"#, "databases.db"),
            (#"{"databases": {"db": {}}}"#, "databases.db.adapter"),
            (#"{"databases": {"db": {"adapter": ""}}}"#, "databases.db.adapter"),
            (
                #"{"databases": {"db": {"adapter": "PostgresAdapter", "connectionString": 5}}}"#,
                "databases.db.connectionString"
            ),
        ] as [(String, String)]
    )
    func badField(json: String, field: String) throws {
        let pem = try PEMFiles()
        defer { pem.remove() }
        let path = try configurationFile(pem.substitute(json))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = try #require(throws: AgentConfigurationError.self) {
            try AgentConfiguration.load(file: path, environment: [:])
        }
        #expect(error.field == field)
        #expect(error.source == path)
        #expect(error.description.hasPrefix("\(path): \(field): "))
        #expect(!error.reason.isEmpty)
    }

    @Test(
        "a bad connection, agentInfo or database variable is named in the error",
        arguments: [
            (["COATY_KEEPALIVE": "soon"], "COATY_KEEPALIVE"),
            (["COATY_KEEPALIVE": "4"], "COATY_KEEPALIVE"),
            (["COATY_KEEPALIVE": "-5"], "COATY_KEEPALIVE"),
            (["COATY_BROKER": "mqtts://b", "COATY_CA_FILE": "/nonexistent/ca.pem"], "COATY_CA_FILE"),
            (["COATY_BROKER": "mqtts://b", "COATY_CERT_FILE": "/nonexistent/c.pem"], "COATY_CERT_FILE"),
            (["COATY_BROKER": "mqtts://b", "COATY_KEY_FILE": "/nonexistent/k.pem"], "COATY_KEY_FILE"),
            (["COATY_BROKER": "mqtts://b", "COATY_CERT_FILE": "$CERT"], "COATY_KEY_FILE"),
            (["COATY_BROKER": "mqtts://b", "COATY_KEY_FILE": "$KEY"], "COATY_CERT_FILE"),
            (["COATY_BROKER": "mqtts://b", "COATY_TLS_VERIFY": "perhaps"], "COATY_TLS_VERIFY"),
            (["COATY_BROKER": "mqtt://b", "COATY_CA_FILE": "$CA"], "COATY_BROKER"),
            (["COATY_DATABASE_db": "mysql://x"], "COATY_DATABASE_db"),
            (["COATY_DATABASE_db": "sqlite:"], "COATY_DATABASE_db"),
        ] as [([String: String], String)]
    )
    func badEnvironment(environment: [String: String], variable: String) throws {
        let pem = try PEMFiles()
        defer { pem.remove() }
        let error = try #require(throws: AgentConfigurationError.self) {
            try AgentConfiguration.load(environment: environment.mapValues(pem.substitute))
        }
        #expect(error.field == variable)
        #expect(error.source == nil)
        #expect(error.description.hasPrefix("\(variable): "))
    }

    @Test("validate() checks what code sets: keep-alive, TLS files and pairing, TLS needs mqtts://, adapters")
    func validateInCode() throws {
        let pem = try PEMFiles()
        defer { pem.remove() }
        let cases: [(AgentConfiguration, String)] = [
            (AgentConfiguration(keepAlive: 2), "keepAlive"),
            (AgentConfiguration(brokerURL: "mqtts://b", caFile: "/nonexistent"), "caFile"),
            (AgentConfiguration(brokerURL: "mqtts://b", certificateFile: pem.cert), "privateKeyFile"),
            (AgentConfiguration(brokerURL: "mqtts://b", privateKeyFile: pem.key), "certificateFile"),
            (AgentConfiguration(caFile: pem.ca), "brokerURL"),
            (AgentConfiguration(verifiesServer: false), "brokerURL"),
            (AgentConfiguration(databases: ["db": DatabaseOptions(adapter: "")]), "databases.db.adapter"),
        ]
        for (configuration, field) in cases {
            let error = try #require(throws: AgentConfigurationError.self) { try configuration.validate() }
            #expect(error.field == field)
        }
        try AgentConfiguration(brokerURL: "mqtts://b", keepAlive: 0, caFile: pem.ca).validate()
    }

    @Test("Codable and json round trip keep every new field; the description hides the password")
    func roundTripAndRedaction() throws {
        let pem = try PEMFiles()
        defer { pem.remove() }
        let configuration = try AgentConfiguration(json: JSONValue(parsing: pem.substitute(fullFile)))
        let json = configuration.json
        #expect(json["communication"]?["mqttClientOptions"]?["username"] == "light")
        #expect(json["communication"]?["mqttClientOptions"]?["keepalive"] == 30)
        #expect(json["communication"]?["mqttClientOptions"]?["rejectUnauthorized"] == false)
        #expect(json["communication"]?["mqttClientOptions"]?["will"] == nil, "Coaty's will is not configurable")
        let expectedInfo = try JSONValue(parsing: agentInfoJSON)
        #expect(json["common"]?["agentInfo"] == expectedInfo)
        #expect(json["databases"]?["store"]?["adapter"] == "PostgresAdapter")
        #expect(try AgentConfiguration(json: json) == configuration)
        let encoded = try JSONValueEncoder().encode(configuration)
        #expect(try JSONValueDecoder().decode(AgentConfiguration.self, from: encoded) == configuration)

        #expect(!configuration.description.contains("s3cret"))
        #expect(configuration.description.contains("***"))
        #expect(configuration.description.contains("light-agent"))
        #expect(AgentConfiguration().json["communication"]?["mqttClientOptions"] == nil)
    }

    @Test("AgentInfo: Coaty's defaults, JSON as Coaty JS checks it, and sent as logHost.agentInfo")
    func agentInfo() throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let info = AgentInfo.current(packageName: "light", packageVersion: "2.0.1", buildDate: date, environment: [:])
        #expect(info.packageInfo == AgentPackageInfo(name: "light", version: "2.0.1"))
        #expect(info.buildInfo == AgentBuildInfo(buildDate: "2023-11-14T22:13:20.250Z", buildMode: "development"))
        #expect(info.configInfo == AgentConfigInfo(serviceHost: ""))
        let fromEnvironment = AgentInfo.current(environment: ["COATY_ENV": "production", "COATY_SERVICE_HOST": "h"])
        #expect(fromEnvironment.buildInfo.buildMode == "production")
        #expect(fromEnvironment.configInfo.serviceHost == "h")
        #expect(fromEnvironment.packageInfo.name == ProcessInfo.processInfo.processName)

        #expect(
            info.json
                == [
                    "packageInfo": ["name": "light", "version": "2.0.1"],
                    "buildInfo": ["buildDate": "2023-11-14T22:13:20.250Z", "buildMode": "development"],
                    "configInfo": ["serviceHost": ""],
                ]
        )
        let parsed = try JSONValue(parsing: agentInfoJSON)
        let read = try AgentInfo(json: parsed)
        #expect(read.json == parsed)
        #expect(try JSONValueEncoder().encode(read) == parsed, "Codable writes the same JSON")
        #expect(try JSONValueDecoder().decode(AgentInfo.self, from: parsed) == read)

        let configuration = AgentConfiguration(agentInfo: read)
        #expect(configuration.logHost.agentInfo == parsed)
        #expect(configuration.logHost.pid == Double(ProcessInfo.processInfo.processIdentifier))
        #expect(AgentConfiguration().logHost.agentInfo == nil)
    }

    @Test(
        "DatabaseOptions: Coaty JS's adapter names and short names map onto CoatyKit's backends",
        arguments: [
            ("InMemoryAdapter", DatabaseOptions.Backend.inMemory), ("memory", .inMemory),
            ("SqLiteNodeAdapter", .sqlite), ("sqlite", .sqlite), ("PostgresAdapter", .postgres),
            ("postgres", .postgres), ("SqLiteCordovaAdapter", .other("SqLiteCordovaAdapter")),
        ]
    )
    func databaseBackends(adapter: String, backend: DatabaseOptions.Backend) throws {
        #expect(DatabaseOptions(adapter: adapter).backend == backend)
        let options = try DatabaseOptions(json: DatabaseOptions(adapter: adapter, connectionString: "c").json, at: "db")
        #expect(options == DatabaseOptions(adapter: adapter, connectionString: "c"))
    }
}
