// swift-tools-version: 6.1
// In-process micro benchmarks of CoatyKit's codec, filter matcher and store, with
// ordo-one/benchmark (package-benchmark): per iteration wall clock and allocations (and CPU
// instructions where the machine has hardware counters), each beside a baseline in the same run.
// Its own package, so that neither the main build nor CI carries the benchmark tool.
//
//   cd Benchmarks/Micro && swift package --allow-writing-to-package-directory benchmark
//   (Benchmarks/run micro does the same)

import Foundation
import PackageDescription

/// The CoatyKit checkout two levels up; a path dependency's identity is its directory's name.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

let package = Package(
    name: "CoatyMicroBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: root.path),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "CoatyMicro",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "CoatyCore", package: root.lastPathComponent),
                .product(name: "CoatySQLite", package: root.lastPathComponent),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/CoatyMicro",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
