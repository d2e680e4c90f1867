public import Foundation

/// Package, build and configuration information about an agent (Coaty's `AgentInfo`).
///
/// As in Coaty JS 2.4.1 (`runtime/agent-info.ts`, `runtime/configuration.ts`) it is **not** a
/// Coaty object: it has no objectId and is neither advertised nor discoverable. An agent reads it
/// from `common.agentInfo` of its configuration (``AgentConfiguration/agentInfo``) and sends it as
/// `logHost.agentInfo` of the ``Log`` objects it advertises, as Coaty JS's controllers do
/// (`controller.ts`, `_log`): see ``AgentConfiguration/logHost``. Its JSON:
///
/// ```json
/// { "packageInfo": { "name": "light-agent", "version": "1.2.0" },
///   "buildInfo": { "buildDate": "2024-05-01T10:00:00.000Z", "buildMode": "production" },
///   "configInfo": { "serviceHost": "" } }
/// ```
///
/// Every part keeps the members it does not declare (Coaty allows any), so they survive a
/// round trip.
public struct AgentInfo: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The agent's package: name and version.
    public var packageInfo: AgentPackageInfo
    /// The agent's build: date and mode.
    public var buildInfo: AgentBuildInfo
    /// The agent's configuration: the service host.
    public var configInfo: AgentConfigInfo
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case packageInfo, buildInfo, configInfo
    }

    /// Creates agent information.
    /// - Parameters:
    ///   - packageInfo: the package.
    ///   - buildInfo: the build.
    ///   - configInfo: the configuration.
    public init(packageInfo: AgentPackageInfo, buildInfo: AgentBuildInfo, configInfo: AgentConfigInfo) {
        self.packageInfo = packageInfo
        self.buildInfo = buildInfo
        self.configInfo = configInfo
    }

    /// Information about this process, for an agent whose configuration has none.
    ///
    /// ```swift
    /// let info = AgentInfo.current(packageName: "light-agent", packageVersion: "1.2.0")
    /// ```
    ///
    /// - Parameters:
    ///   - packageName: the package name; the process name by default.
    ///   - packageVersion: the package version.
    ///   - buildDate: the build date; the modification date of the executable by default (now when
    ///     it cannot be read).
    ///   - environment: the variables to read, the process environment when `nil`: the build mode
    ///     is `$COATY_ENV`, else `development`, and the service host `$COATY_SERVICE_HOST`, else
    ///     empty (Coaty's rules, `agent-info.ts`).
    /// - Returns: the information.
    public static func current(
        packageName: String? = nil,
        packageVersion: String = "0.0.0",
        buildDate: Date? = nil,
        environment: [String: String]? = nil
    ) -> AgentInfo {
        let environment = environment ?? ProcessInfo.processInfo.environment
        let executableDate =
            (try? FileManager.default.attributesOfItem(atPath: CommandLine.arguments[0]))?[
                .modificationDate
            ] as? Date
        return AgentInfo(
            packageInfo: AgentPackageInfo(
                name: packageName ?? ProcessInfo.processInfo.processName,
                version: packageVersion
            ),
            buildInfo: AgentBuildInfo(
                buildDate: isoDate(buildDate ?? executableDate ?? Date()),
                buildMode: environment["COATY_ENV"] ?? AgentBuildInfo.defaultBuildMode
            ),
            configInfo: AgentConfigInfo(serviceHost: environment["COATY_SERVICE_HOST"] ?? "")
        )
    }

    /// A date in ISO 8601 with milliseconds in UTC, as JavaScript's `Date.toISOString()` writes it.
    /// - Parameter date: the date.
    /// - Returns: e.g. `2024-05-01T10:00:00.000Z`.
    public static func isoDate(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// The information as JSON (declared members first, then ``custom``), as Coaty JS sends it in
    /// `logHost.agentInfo`.
    public var json: JSONValue {
        .object(
            Self.merging(
                [
                    "packageInfo": .object(
                        Self.merging(
                            ["name": .string(packageInfo.name), "version": .string(packageInfo.version)],
                            packageInfo.custom
                        )
                    ),
                    "buildInfo": .object(
                        Self.merging(
                            ["buildDate": .string(buildInfo.buildDate), "buildMode": .string(buildInfo.buildMode)],
                            buildInfo.custom
                        )
                    ),
                    "configInfo": .object(
                        Self.merging(["serviceHost": .string(configInfo.serviceHost)], configInfo.custom)
                    ),
                ],
                custom
            )
        )
    }

    private static func merging(_ declared: JSONObject, _ custom: JSONObject) -> JSONObject {
        var result = declared
        for (key, value) in custom where result[key] == nil { result[key] = value }
        return result
    }

    /// `object` without the members named `keys`.
    package static func removing(_ keys: [String], from object: JSONObject) -> JSONObject {
        JSONObject(object.lazy.filter { !keys.contains($0.key) }.map { ($0.key, $0.value) })
    }
}

/// The package of an agent (``AgentInfo/packageInfo``).
public struct AgentPackageInfo: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The package name.
    public var name: String
    /// The package version.
    public var version: String
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case name, version
    }

    /// Creates package information.
    /// - Parameters:
    ///   - name: the package name.
    ///   - version: the package version.
    public init(name: String, version: String) {
        self.name = name
        self.version = version
    }
}

/// The build of an agent (``AgentInfo/buildInfo``).
public struct AgentBuildInfo: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// Coaty's default build mode, `development`, used when `COATY_ENV` is not set.
    public static let defaultBuildMode = "development"

    /// The build date in ISO 8601 (``AgentInfo/isoDate(_:)``).
    public var buildDate: String
    /// The build mode: `production`, `development`, `staging`, `testing` or another.
    public var buildMode: String
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case buildDate, buildMode
    }

    /// Creates build information.
    /// - Parameters:
    ///   - buildDate: the build date in ISO 8601.
    ///   - buildMode: the build mode.
    public init(buildDate: String, buildMode: String = Self.defaultBuildMode) {
        self.buildDate = buildDate
        self.buildMode = buildMode
    }
}

/// The configuration of an agent (``AgentInfo/configInfo``).
public struct AgentConfigInfo: Codable, Sendable, Hashable, CustomFieldsCarrying {
    /// The host name of the agent's broker connections and services (`COATY_SERVICE_HOST`), or empty.
    public var serviceHost: String
    /// Members not declared here.
    public var custom: JSONObject = [:]

    enum CodingKeys: String, CodingKey {
        case serviceHost
    }

    /// Creates configuration information.
    /// - Parameter serviceHost: the service host, or empty.
    public init(serviceHost: String = "") {
        self.serviceHost = serviceHost
    }
}
