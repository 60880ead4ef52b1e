"""MySQL/MariaDB binlog change data capture (`source: {class: mysql_cdc}`)."""
