import Foundation

/// Typed reads of configuration members with errors that name the field (for the modules of this package that
/// read a configuration: CoatyRuntime, CoatyStore's database options).
package enum ConfigurationReader {
    package static func path(_ parent: String, _ key: String) -> String { parent.isEmpty ? key : parent + "." + key }

    package static func object(_ value: JSONValue, at path: String) throws(AgentConfigurationError) -> JSONObject {
        guard let object = value.objectValue else {
            throw AgentConfigurationError(field: path.isEmpty ? nil : path, reason: "must be a JSON object")
        }
        return object
    }

    package static func object(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError)
        -> JSONObject?
    {
        guard let value = parent[key], !value.isNull else { return nil }
        return try object(value, at: Self.path(path, key))
    }

    package static func string(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError)
        -> String?
    {
        guard let value = parent[key], !value.isNull else { return nil }
        guard let string = value.stringValue else {
            throw AgentConfigurationError(field: Self.path(path, key), reason: "must be a string, not \(value)")
        }
        return string
    }

    package static func bool(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError) -> Bool? {
        guard let value = parent[key], !value.isNull else { return nil }
        guard let bool = value.boolValue else {
            throw AgentConfigurationError(field: Self.path(path, key), reason: "must be true or false, not \(value)")
        }
        return bool
    }

    package static func count(_ parent: JSONObject, _ key: String, at path: String) throws(AgentConfigurationError) -> Int? {
        guard let value = parent[key], !value.isNull else { return nil }
        guard let count = value.intValue, count >= 0 else {
            throw AgentConfigurationError(
                field: Self.path(path, key),
                reason: "must be a whole number of at least 0, not \(value)"
            )
        }
        return count
    }

    /// A boolean environment variable: `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`/empty.
    package static func flag(_ text: String, variable: String) throws(AgentConfigurationError) -> Bool {
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off", "": return false
        default:
            throw AgentConfigurationError(
                field: variable,
                reason: "'\(text)' is not a boolean; use true/false, yes/no, on/off or 1/0"
            )
        }
    }

    /// A whole number of at least 0 from an environment variable.
    package static func count(_ text: String, variable: String) throws(AgentConfigurationError) -> Int {
        guard let count = Int(text), count >= 0 else {
            throw AgentConfigurationError(field: variable, reason: "'\(text)' is not a whole number of at least 0")
        }
        return count
    }

    /// The path of a readable PEM file (not PEM text: the MQTT client reads certificates from files).
    package static func pemFile(_ path: String, field: String) throws(AgentConfigurationError) -> String {
        guard !path.contains("-----BEGIN") else {
            throw AgentConfigurationError(
                field: field,
                reason: "PEM text is not supported here; save it in a file and give the file's path"
            )
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw AgentConfigurationError(field: field, reason: "cannot read the PEM file '\(path)'")
        }
        return path
    }
}
