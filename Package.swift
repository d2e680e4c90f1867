// swift-tools-version: 6.1
import PackageDescription

/// Language settings applied to every Swift target (Swift 6 mode is implied by the tools version).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "CoatyKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CoatyKit", targets: ["CoatyKit"]),
        .library(name: "CoatyCore", targets: ["CoatyCore"]),
        .library(name: "CoatyModel", targets: ["CoatyModel"]),
        .library(name: "CoatyFilter", targets: ["CoatyFilter"]),
        .library(name: "CoatyCommunication", targets: ["CoatyCommunication"]),
        .library(name: "CoatyRuntime", targets: ["CoatyRuntime"]),
        .library(name: "CoatyMQTTTypes", targets: ["CoatyMQTTTypes"]),
        .library(name: "CoatyMQTT", targets: ["CoatyMQTT"]),
        .library(name: "CoatyMQTTTransport", targets: ["CoatyMQTTTransport"]),
        .library(name: "CoatyTesting", targets: ["CoatyTesting"]),
        .library(name: "CoatyStore", targets: ["CoatyStore"]),
        .library(name: "CoatyRecording", targets: ["CoatyRecording"]),
        .library(name: "CoatySQLite", targets: ["CoatySQLite"]),
        .library(name: "CoatyPostgres", targets: ["CoatyPostgres"]),
        .library(name: "CoatySensorThings", targets: ["CoatySensorThings"]),
        .library(name: "CoatyOperator", targets: ["CoatyOperator"]),
        // Not in the CoatyKit umbrella: it links the DNS-SD library (Avahi's on Linux), which not every agent needs.
        .library(name: "CoatyDiscovery", targets: ["CoatyDiscovery"]),
        // Not in the umbrella either: it brings a web server (Hummingbird).
        .library(name: "CoatyView", targets: ["CoatyView"]),
        .executable(name: "coaty", targets: ["coaty"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.0"),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", exact: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `coaty view`'s web server; no traits: the configuration-file support is not needed.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        // The CLI's OpenTelemetry export of traces (OTLP over HTTP only: no gRPC stack).
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // MARK: C cellar
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"]), .brew(["mosquitto"])]
        ),
        .target(
            name: "CMosquittoShim",
            dependencies: ["CMosquitto"]
            // No unsafeFlags (e.g. -Wall): SwiftPM refuses them in a package used as a dependency.
        ),
        // dns_sd.h: Avahi's Bonjour compatibility library on Linux (the library is linked by CoatyDiscovery),
        // mDNSResponder's in libSystem on Apple systems.
        .systemLibrary(
            name: "CDNSSD",
            providers: [.apt(["libavahi-compat-libdnssd-dev"])]
        ),

        // MARK: Libraries
        // The MQTT wing, by job: MQTT's vocabulary (no I/O, no dependencies) ← the MQTT client (no Coaty) ←
        // the Coaty transport over it (the one module that imports both sides).
        .target(
            name: "CoatyMQTTTypes",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyMQTT",
            dependencies: [
                "CoatySync",
                "CMosquittoShim",
                "CoatyMQTTTypes",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyMQTTTransport",
            dependencies: [
                "CoatySync", "CoatyMQTT", "CoatyModel", "CoatyCommunication", "CoatyRuntime",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The core, by job; arrows point one way: Model ← Filter ← Communication ← Runtime. CoatyCore
        // re-exports the four.
        .target(
            name: "CoatyModel",
            dependencies: ["CoatySync"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyFilter",
            dependencies: ["CoatyModel"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyCommunication",
            dependencies: [
                "CoatySync", "CoatyModel", "CoatyFilter", "CoatyMQTTTypes",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyRuntime",
            dependencies: [
                "CoatySync", "CoatyModel", "CoatyFilter", "CoatyCommunication", "CoatyStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyCore",
            dependencies: ["CoatyModel", "CoatyFilter", "CoatyCommunication", "CoatyRuntime", "CoatyStore"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatySync",
            swiftSettings: swiftSettings
        ),
        .target(
            // A throwaway mosquitto on a loopback port (MosquittoBroker): `coaty demo` and the tests.
            name: "CoatyLocalBroker",
            dependencies: ["CoatySync"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyTesting",
            dependencies: [
                "CoatySync",
                "CoatyCore",
                "CoatyLocalBroker",
                // The fault-injecting TCP proxy (FaultInjectingProxy) runs on SwiftNIO.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The store by job: the repository SPI, the typed API and the in-memory backend need only the object model
        // and the filters; the recorder, the historian and the local store (which talk to the network) build on it.
        .target(
            name: "CoatyStore",
            dependencies: [
                "CoatySync", "CoatyModel", "CoatyFilter", .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyRecording",
            dependencies: [
                "CoatySync", "CoatyStore", "CoatyCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatySQLite",
            dependencies: [
                "CoatySync", "CoatyModel", "CoatyFilter", "CoatyStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyPostgres",
            dependencies: [
                "CoatySync", "CoatyModel", "CoatyFilter", "CoatyStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyKit",
            // Re-exports only.
            dependencies: ["CoatyCore", "CoatyMQTT", "CoatyMQTTTransport"],
            swiftSettings: swiftSettings
        ),
        .target(
            // The operator endpoints: /metrics (Prometheus) and /health/live, /health/ready over a
            // small NIOHTTP1 server (swift-nio is built anyway, for PostgreSQL and the test proxy).
            name: "CoatyOperator",
            dependencies: [
                "CoatySync",
                "CoatyCore",
                "CoatyStore", "CoatyRecording",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatyDiscovery",
            dependencies: [
                "CDNSSD",
                "CoatySync",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: [.linkedLibrary("dns_sd", .when(platforms: [.linux]))]
        ),
        .target(
            name: "CoatyView",
            dependencies: [
                "CoatySync", "CoatyCore", "CoatyMQTT",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            // The page's sources; EmbeddedAssets.swift carries them into the binary (Scripts/embed-view-assets).
            exclude: ["Assets"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoatySensorThings",
            dependencies: ["CoatySync", "CoatyCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),

        // MARK: Executables
        .executableTarget(
            name: "coaty",
            dependencies: [
                "CoatySync",
                "CoatyKit",
                "CoatyStore", "CoatyRecording",
                "CoatySQLite",
                "CoatyPostgres",
                "CoatyOperator",
                "CoatyDiscovery",
                // `coaty demo` starts a throwaway mosquitto (MosquittoBroker), without the testing product.
                "CoatyLocalBroker",
                "CoatyView",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Fuzzing (Fuzz/run builds coaty-fuzz with libFuzzer; the tests replay the corpora)
        .target(
            name: "CoatyFuzzTargets",
            dependencies: ["CoatyCore"],
            path: "Fuzz/Targets",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "coaty-fuzz",
            dependencies: ["CoatyFuzzTargets"],
            path: "Fuzz/Driver",
            swiftSettings: swiftSettings
        ),

        // MARK: Benchmarks (run with Benchmarks/run; never part of the tests)
        .executableTarget(
            name: "mqtt-baseline",
            dependencies: ["CMosquitto"],
            path: "Benchmarks/MQTTBaseline"
        ),
        .target(
            name: "BenchmarkSupport",
            dependencies: [
                "CoatyCore", "CoatyMQTT", "CoatyTesting", .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Benchmarks/Support",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "mqtt-benchmark",
            dependencies: [
                "CoatyTesting",
                "BenchmarkSupport", "CoatyCore", "CoatyMQTT", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/MQTTBenchmark",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "agent-benchmark",
            dependencies: [
                "CoatyTesting", "BenchmarkSupport", "CoatyKit", "CoatyRecording", "CoatySQLite",
                .product(name: "Logging", package: "swift-log"),
                // Tracing's cost counted with swift-otel on (BenchmarkTracing).
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Benchmarks/AgentBenchmark",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "store-benchmark",
            dependencies: [
                "CoatyTesting",
                "BenchmarkSupport", "CoatyKit", "CoatyStore", "CoatyRecording", "CoatySQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/StoreBenchmark",
            swiftSettings: swiftSettings
        ),

        // MARK: Examples (small agents to copy from; see README "Examples")
        .executableTarget(
            name: "hello-service",
            dependencies: ["CoatyKit", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/HelloService",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "hello-client",
            dependencies: ["CoatyKit", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/HelloClient",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sensor-agent",
            dependencies: [
                "CoatyKit", "CoatySensorThings", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/SensorAgent",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "service-group-agent",
            dependencies: [
                "CoatyKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            path: "Examples/ServiceGroupAgent",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "recorder-with-query",
            dependencies: [
                "CoatyKit",
                "CoatyStore", "CoatyRecording",
                "CoatySQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/RecorderWithQuery",
            swiftSettings: swiftSettings
        ),

        // MARK: Test support
        .target(
            name: "CoatyStoreTestSupport",
            // CoatyTesting for MosquittoBroker.freeLoopbackPort (the PostgreSQL test server's port).
            dependencies: ["CoatyStore", "CoatyRecording", "CoatyCore", "CoatyTesting"],
            path: "Tests/CoatyStoreTestSupport",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AgentProcessTestSupport",
            dependencies: ["CoatyKit", "CoatySync", "CoatyTesting"],
            path: "Tests/AgentProcessTestSupport",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "DNSSDTestSupport",
            // The tests' own dbus-daemon and avahi-daemon (TestSupportError and the CI flag from AgentProcessTestSupport,
            // the spawn helper from CoatyTesting's MosquittoBroker).
            dependencies: ["AgentProcessTestSupport", "CoatySync", "CoatyTesting"],
            path: "Tests/DNSSDTestSupport",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "coaty-mqtt-probe",
            dependencies: ["CoatyMQTT", "CoatyKit"],
            path: "Tests/MQTTProbe",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        .testTarget(
            name: "CoatyCoreTests",
            dependencies: [
                "CoatyCore", "CoatySync", "CoatyFuzzTargets",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyMQTTTests",
            dependencies: ["CoatyMQTT", "CoatySync", "CoatyTesting", "AgentProcessTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyCLITests",
            dependencies: [
                "CoatyKit", "CoatyMQTT", "CoatyTesting", "AgentProcessTestSupport", "CoatyStoreTestSupport",
                "CoatyDiscovery",
                "DNSSDTestSupport", .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyDiscoveryTests",
            dependencies: [
                "CoatyDiscovery", "DNSSDTestSupport", "AgentProcessTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            // The example programs, and the first example of each DocC catalog compiled (CatalogExampleTests).
            name: "ExamplesTests",
            dependencies: [
                "CoatyTesting", "CoatyKit", "CoatyStore", "CoatySQLite", "AgentProcessTestSupport", "CoatyRecording",
                "CoatyOperator", "CoatyPostgres", "CoatySensorThings", "CoatyDiscovery", "CoatySync",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyKitTests",
            dependencies: [
                "CoatyKit", "CoatySync", "CoatyTesting", "CoatyStore", "CoatyRecording", "CoatySQLite", "AgentProcessTestSupport",
                "CommunicationTestSupport", .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyOperatorTests",
            dependencies: [
                "CoatyOperator", "CoatyKit", "CoatyStore", "CoatyRecording", "CoatySync", "CoatyTesting", "AgentProcessTestSupport",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatySensorThingsTests",
            dependencies: [
                "CoatySensorThings", "CoatyKit", "CoatyTesting", .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyStoreTests",
            dependencies: [
                "CoatyStore", "CoatyRecording", "CoatySQLite", "CoatyStoreTestSupport", "CoatyTesting",
                "CommunicationTestSupport", .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            exclude: ["Fixtures"],  // read by path (#filePath), not bundled
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyPostgresTests",
            dependencies: [
                "CoatyPostgres", "CoatyStore", "CoatyRecording", "CoatyCore", "CoatySync", "CoatyStoreTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            // Against the real Coaty JS 2.4.1 (../shared/coaty-js, or COATY_JS_AGENT) and mosquitto.
            name: "CoatyJSInteropTests",
            dependencies: [
                "CoatyKit", "CoatySync", "CoatyTesting", "AgentProcessTestSupport", "CommunicationTestSupport",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // Unit tests by the module they test, on the in-process broker: the manager, IO routing and the transport
        // contract (CoatyCommunication); configuration, the container, logging and controllers (CoatyRuntime); the
        // in-process broker itself (CoatyTesting).
        .target(
            name: "CommunicationTestSupport",
            dependencies: [
                "CoatyCore", "CoatyTesting", .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            path: "Tests/CommunicationTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyCommunicationTests",
            dependencies: [
                "CommunicationTestSupport", "CoatyTesting", "CoatyCore", "CoatySync",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyRuntimeTests",
            dependencies: [
                "CommunicationTestSupport", "CoatyTesting", "CoatyCore", "CoatySync",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            // The viewer's state and endpoints (unit), and `coaty view` in a real headless Chromium (integration).
            name: "CoatyViewTests",
            dependencies: [
                "CoatyView", "CoatyKit", "CoatySync", "CoatyTesting", "AgentProcessTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoatyTestingTests",
            dependencies: ["CoatyTesting", "CoatyCore", "CoatySync"],
            swiftSettings: swiftSettings
        ),
    ]
)

// MARK: Subsets

/// `COATY_PACKAGE_SUBSET=sanitizers` (Scripts/sanitize-test, Scripts/tsan-test): only the targets the sanitizer jobs
/// test — the MQTT client, the agent with its communication manager, the recorder, and the back-pressure tests —
/// so those jobs do not build PostgreSQL, the CLI, the examples, the benchmarks and the other test targets with a
/// sanitizer ("build only the targets a job needs"). Package.swift is re-evaluated when the variable changes.
if Context.environment["COATY_PACKAGE_SUBSET"] == "sanitizers" {
    let kept: Set<String> = [
        "CMosquitto", "CMosquittoShim", "CoatySync", "CoatyModel", "CoatyFilter", "CoatyCommunication", "CoatyRuntime",
        "CoatyCore", "CoatyMQTTTypes", "CoatyMQTT", "CoatyMQTTTransport", "CoatyLocalBroker", "CoatyTesting", "CoatyStore", "CoatyRecording",
        "CoatySQLite", "CoatyKit", "AgentProcessTestSupport", "coaty-mqtt-probe",
        "CoatyMQTTTests", "CoatyKitTests", "CoatyTestingTests", "CoatyCommunicationTests", "CommunicationTestSupport",
    ]
    package.targets = package.targets.filter { kept.contains($0.name) }
    // Only the operator endpoint uses swift-prometheus: not resolved, and no "unused dependency" warning.
    package.dependencies = package.dependencies.filter { dependency in
        guard case .sourceControl(_, let location, _) = dependency.kind else { return true }
        return !location.hasSuffix("/swift-prometheus") && !location.contains("/hummingbird")
            && !location.hasSuffix("/swift-otel")
    }
    package.products = package.products.filter { product in
        product.name != "coaty" && product.name != "CoatyPostgres" && product.name != "CoatySensorThings"
            && product.name != "CoatyOperator"
            && product.name != "CoatyDiscovery" && product.name != "CoatyView"
    }
}
